#!/bin/sh
# The official image's redis-server listens everywhere without protected mode: do the same.
set -eu
[ "$1" = redis-server ] && shift && exec redis-server --bind '* -::*' --protected-mode no "$@"
exec "$@"
