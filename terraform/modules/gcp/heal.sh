#!/bin/sh
# Autohealing of the daemon's VM: restart spotfolio.service when its
# container's HEALTHCHECK (the daemon's /readyz: the lease held, the market
# fresh, the queue readable) has failed its retries. Docker only marks a
# container unhealthy; on a single VM nothing else acts on it. The restart
# resumes from the store, as after any stop. Run by spotfolio-heal.timer.
set -u
status=$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{end}}' spotfolio 2>/dev/null) || exit 0
[ "$status" = unhealthy ] || exit 0
echo "spotfolio container unhealthy (/readyz failing): restarting spotfolio.service"
exec systemctl restart spotfolio.service
