# Stand-in for python:3.11-slim-bookworm where Docker Hub cannot be reached: Debian's Python
# 3.11 with venv, `python` on PATH, and pip allowed outside a venv like the official image.
FROM flightpipe-standin/debian:bookworm
# SSL_CERT_FILE: uv trusts only its built-in roots otherwise, not the CAs copied from this host.
ENV LANG=C.UTF-8 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python-is-python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* /usr/lib/python3*/EXTERNALLY-MANAGED
CMD ["python3"]
