"""Structure of the compose deployment (no Docker engine runs here, so the file is checked).

Covers the services and their commands, queue routing, the GPU reservation, health checks,
volumes, loopback-only ports, required secrets (no default password anywhere), and that every
Airflow setting the file sets is a real option of the installed Airflow and Celery provider.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
ENV_EXAMPLE = (REPO / "docker" / ".env.example").read_text()
DOCKERFILE = (REPO / "docker" / "Dockerfile").read_text()
INIT_SCRIPT = REPO / "docker" / "airflow-init.sh"

AIRFLOW = ["airflow-api-server", "airflow-scheduler", "airflow-dag-processor",
           "airflow-triggerer", "airflow-worker", "airflow-worker-gpu"]
LONG_RUNNING = [*AIRFLOW, "postgres", "redis", "gcs-emulator", "dask-scheduler"]
REQUIRED = {"_AIRFLOW_WWW_USER_PASSWORD", "POSTGRES_PASSWORD", "AIRFLOW_FERNET_KEY",
            "AIRFLOW_JWT_SECRET", "AIRFLOW_API_SECRET_KEY"}
VAR = re.compile(r"\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error} substitution."""
    def sub(m: re.Match) -> str:
        name, op, arg = m["name"], m["op"], m["arg"]
        current = env.get(name)
        if op == ":?" and not current:
            raise KeyError(f"{name}: {arg}")
        if op == ":-" and not current:
            return arg
        if op == "-" and current is None:
            return arg
        return current or ""
    return VAR.sub(sub, value.replace("$$", "\0")).replace("\0", "$")


def walk_strings(node: object):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from walk_strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk_strings(value)


def env_of(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in SERVICES[service].get("environment", {}).items()}


def command(service: str) -> list[str]:
    cmd = SERVICES[service]["command"]
    return cmd if isinstance(cmd, list) else cmd.split()


def test_services_of_the_topology_exist() -> None:
    assert set(AIRFLOW + ["postgres", "redis", "gcs-emulator", "airflow-init"]) <= set(SERVICES)
    assert command("airflow-api-server")[:2] == ["airflow", "api-server"]
    assert command("airflow-scheduler") == ["airflow", "scheduler"]
    assert command("airflow-dag-processor") == ["airflow", "dag-processor"]
    assert command("airflow-triggerer") == ["airflow", "triggerer"]
    # The shipped emulator that honours ifGenerationMatch, not the stock one (which ignores it).
    assert command("gcs-emulator")[:3] == ["python", "-m", "etl.storage.emulator"]
    assert command("gcs-emulator")[-2:] == ["--data-dir", "/data"]


def _queues(service: str) -> str:
    cmd = command(service)
    assert cmd[:3] == ["airflow", "celery", "worker"], cmd
    return cmd[cmd.index("--queues") + 1]


def test_workers_split_default_and_gpu_queues() -> None:
    assert _queues("airflow-worker") == "default"
    assert _queues("airflow-worker-gpu") == "gpu"
    gpu = SERVICES["airflow-worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    assert gpu["build"]["target"] == "gpu" and SERVICES["airflow-worker"]["build"]["target"] == "base"
    # One worker process per GPU slot, the same variable that sizes the gpu pool.
    cmd = command("airflow-worker-gpu")
    assert cmd[cmd.index("--concurrency") + 1] == "${AIRFLOW_GPU_POOL_SLOTS:-1}"
    assert env_of("airflow-init")["AIRFLOW_GPU_POOL_SLOTS"] == "${AIRFLOW_GPU_POOL_SLOTS:-1}"
    assert "deploy" not in SERVICES["airflow-worker"]


def test_celery_postgres_redis_wiring() -> None:
    env = {k: interpolate(v, {n: "x" for n in REQUIRED}) for k, v in env_of("airflow-scheduler").items()}
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://airflow:x@postgres:5432/")
    assert env["AIRFLOW__CELERY__RESULT_BACKEND"].startswith(
        "db+postgresql+psycopg2://airflow:x@postgres:5432/")
    assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://redis:6379/")
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-api-server:8080/execution/"
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/flightpipe/dags"
    assert env["STORAGE_EMULATOR_HOST"] == "http://gcs-emulator:9023"
    assert env["PIPELINE_STORAGE_ROOT"].startswith("gs://")
    # every component shares one configuration; the default worker adds only its preload
    preload = "AIRFLOW__CELERY__EXTRA_CELERY_CONFIG"
    for name in AIRFLOW:
        own = {k: v for k, v in env_of(name).items() if name != "airflow-worker" or k != preload}
        shared = {k: v for k, v in env_of("airflow-scheduler").items()
                  if name != "airflow-worker" or k != preload}
        assert own == shared, name


def test_the_workers_that_validate_preload_great_expectations() -> None:
    """The default Celery worker and the Dask workers import GX once at start, every task
    they run finds it loaded; the GPU worker, which never validates, does not."""

    def imports(service: str) -> list[str]:
        return json.loads(env_of(service)["AIRFLOW__CELERY__EXTRA_CELERY_CONFIG"]).get("imports", [])

    assert imports("airflow-worker") == ["etl.validation.gx"]
    assert imports("airflow-worker-gpu") == [] and imports("airflow-scheduler") == []
    cmd = command("dask-worker")
    assert cmd[cmd.index("--preload") + 1] == "etl.validation.gx"
    assert importlib.util.find_spec("etl.validation.gx") is not None


@pytest.mark.parametrize("service", LONG_RUNNING)
def test_long_running_services_have_health_checks(service: str) -> None:
    check = SERVICES[service]["healthcheck"]
    assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"] and check["retries"]


def test_startup_order_waits_for_health_and_init() -> None:
    for name in AIRFLOW:
        deps = SERVICES[name]["depends_on"]
        assert deps["postgres"]["condition"] == deps["redis"]["condition"] == "service_healthy"
        assert deps["airflow-init"]["condition"] == "service_completed_successfully"
    assert "airflow-init" not in SERVICES["airflow-init"]["depends_on"]
    assert SERVICES["airflow-init"]["restart"] == "no"


def test_init_migrates_and_creates_admin_from_env_without_default_password() -> None:
    assert command("airflow-init") == ["bash", "/opt/flightpipe/docker/airflow-init.sh"]
    init_env = env_of("airflow-init")
    assert init_env["_AIRFLOW_WWW_USER_PASSWORD"].startswith("${_AIRFLOW_WWW_USER_PASSWORD:?")
    script = INIT_SCRIPT.read_text()
    for step in ("airflow db migrate", "airflow pools set dask", "airflow pools set gpu",
                 '"${_AIRFLOW_WWW_USER_PASSWORD:?'):
        assert step in script, step


def test_init_script_refuses_to_run_without_a_password(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "p.json")}
    proc = subprocess.run(["bash", str(INIT_SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode != 0 and "_AIRFLOW_WWW_USER_PASSWORD" in proc.stderr
    assert not (tmp_path / "p.json").exists()


def test_no_secret_has_a_default() -> None:
    texts = list(walk_strings(COMPOSE))
    used_required = {m["name"] for t in texts for m in VAR.finditer(t) if m["op"] == ":?"}
    assert used_required == REQUIRED
    for text in texts:
        for m in VAR.finditer(text):
            if re.search(r"PASSWORD|SECRET|FERNET|KEY", m["name"]) and m["name"] != "PIPELINE_GCP_CONN_ID":
                assert m["op"] == ":?", f"{m[0]} must be required, not defaulted"
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD"):
        interpolate(SERVICES["postgres"]["environment"]["POSTGRES_PASSWORD"], {})
    # The example file leaves every required secret blank.
    for name in REQUIRED:
        assert re.search(rf"^{name}=$", ENV_EXAMPLE, re.MULTILINE), name


def test_every_compose_variable_is_documented_in_env_example() -> None:
    names = {m["name"] for t in walk_strings(COMPOSE) for m in VAR.finditer(t)} - {"HOSTNAME"}
    documented = set(re.findall(r"^(\w+)=", ENV_EXAMPLE, re.MULTILINE))
    assert names <= documented, sorted(names - documented)


def test_published_ports_bind_to_loopback_by_default() -> None:
    published = {name: svc["ports"] for name, svc in SERVICES.items() if "ports" in svc}
    assert set(published) == {"airflow-api-server", "gcs-emulator", "dask-scheduler"}
    for name, ports in published.items():
        for port in ports:
            assert interpolate(port, {}).startswith("127.0.0.1:"), (name, port)
    assert interpolate(published["airflow-api-server"][0], {}) == "127.0.0.1:8080:8080"
    for name in ("postgres", "redis"):
        assert "ports" not in SERVICES[name], f"{name} must stay on the compose network"


def test_volumes_persist_state_and_share_logs() -> None:
    declared = set(COMPOSE["volumes"])
    assert {"postgres-db", "redis-data", "gcs-data", "airflow-logs", "airflow-auth"} <= declared
    assert "postgres-db:/var/lib/postgresql/data" in SERVICES["postgres"]["volumes"]
    for name in [*AIRFLOW, "airflow-init"]:
        vols = SERVICES[name]["volumes"]
        assert "airflow-logs:/opt/airflow/logs" in vols and "airflow-auth:/opt/airflow/auth" in vols
    used = {v.split(":")[0] for s in SERVICES.values() for v in s.get("volumes", [])}
    assert used <= declared | {"."} and declared <= used


def _airflow_options() -> set[tuple[str, str]]:
    """(section, key) of every option the installed Airflow core and Celery provider know."""
    spec = importlib.util.find_spec("airflow")
    assert spec and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    core = yaml.safe_load((root / "config_templates" / "config.yml").read_text())
    options = {(s, k) for s, body in core.items() for k in body.get("options", {})}
    provider = importlib.util.spec_from_file_location(
        "celery_provider_info", root / "providers" / "celery" / "get_provider_info.py")
    module = importlib.util.module_from_spec(provider)
    provider.loader.exec_module(module)
    for section, body in module.get_provider_info()["config"].items():
        options |= {(section, k) for k in body["options"]}
    return options


def test_every_airflow_setting_is_a_real_option() -> None:
    options = _airflow_options()
    names = {k for s in SERVICES.values() for k in s.get("environment", {})}
    names |= set(re.findall(r"\b(AIRFLOW__\w+)=", DOCKERFILE))
    settings = sorted(n for n in names if n.startswith("AIRFLOW__"))
    assert len(settings) > 10 and "AIRFLOW__CORE__PLUGINS_FOLDER" in settings
    unknown = [n for n in settings
               if tuple(n.removeprefix("AIRFLOW__").lower().split("__", 1)) not in options]
    assert not unknown, f"not Airflow options: {unknown}"


def test_auth_manager_is_the_simple_one_and_honestly_configured() -> None:
    env = env_of("airflow-api-server")
    module, _, cls = env["AIRFLOW__CORE__AUTH_MANAGER"].rpartition(".")
    assert cls == "SimpleAuthManager" and importlib.util.find_spec(module) is not None
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "${_AIRFLOW_WWW_USER_USERNAME:-admin}:admin"
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"].startswith("/opt/airflow/auth/")
    assert "simple_auth_manager_all_admins" not in str(COMPOSE).lower()  # auth stays on


def test_dockerfile_installs_the_lock_and_runs_unprivileged() -> None:
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\w+)", DOCKERFILE, re.MULTILINE)
    assert stages == ["base", "gpu"]
    assert "-r requirements.lock" in DOCKERFILE and "asyncpg" in DOCKERFILE
    assert 'tensorflow[and-cuda]' in DOCKERFILE
    users = re.findall(r"^USER\s+(\S+)", DOCKERFILE, re.MULTILINE)
    assert users[-1] == "airflow"
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    for src in re.findall(r"^COPY\s+(?:--\S+\s+)*(.+?)\s+\S+$", DOCKERFILE, re.MULTILINE):
        for path in src.split():
            assert (REPO / path).exists(), path
            assert f"!{path}" in ignore, f"{path} is copied but excluded from the build context"


def test_emulator_volume_is_owned_by_the_image_user() -> None:
    # A new named volume takes the owner of the image's directory: /data must be airflow's.
    assert "gcs-data:/data" in SERVICES["gcs-emulator"]["volumes"]
    assert re.search(r"mkdir -p [^\n]*/data\b", DOCKERFILE)
    assert re.search(r"chown -R airflow:airflow [^\n]*/data\b", DOCKERFILE)


def test_dockerfile_builds_offline_with_either_builder() -> None:
    # A syntax directive makes BuildKit pull its frontend image; the classic builder reads only
    # the context root's .dockerignore, so a <Dockerfile>.dockerignore would filter nothing there.
    assert not re.search(r"^#\s*syntax\s*=", DOCKERFILE, re.MULTILINE | re.IGNORECASE)
    assert not (REPO / "docker" / "Dockerfile.dockerignore").exists()
    rules = [line for line in (REPO / ".dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]
    assert rules[0] == "*"  # exclude everything, then re-include what the image copies
