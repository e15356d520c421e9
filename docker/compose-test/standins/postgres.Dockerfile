# Stand-in for postgres:16-bookworm where Docker Hub cannot be reached. Bookworm ships
# PostgreSQL 15 (Airflow 3 supports it); the entrypoint honours POSTGRES_USER/PASSWORD/DB and
# PGDATA=/var/lib/postgresql/data like the official image's.
FROM flightpipe-standin/debian:bookworm
ENV LANG=C.UTF-8 PGDATA=/var/lib/postgresql/data PATH=/usr/lib/postgresql/15/bin:$PATH
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p "$PGDATA" /var/run/postgresql \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql && chmod 700 "$PGDATA"
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
USER postgres
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
