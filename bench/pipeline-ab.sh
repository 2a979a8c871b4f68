#!/usr/bin/env bash
# bench:pipeline side by side with an earlier commit: bench/ab.sh pipeline (which says what it runs).
#
#   KAFKA_BROKERS=127.0.0.1:19092 bench/pipeline-ab.sh REV [ROUNDS]
exec "$(dirname "$0")/ab.sh" pipeline "$@"
