# Stand-in for redis:7.4-bookworm where Docker Hub cannot be reached: Debian's Redis 7.0,
# listening on all interfaces with protected mode off like the official image, data in /data.
FROM flightpipe-standin/debian:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /data && chown redis:redis /data
COPY redis-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
WORKDIR /data
USER redis
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
