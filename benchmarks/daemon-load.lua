-- SPDX-License-Identifier: GPL-2.0-only
-- wrk's request mix for benchmarks/daemon-load.py: mostly one guest's
-- detail (a client watching its VM), then the host, the reservations, and
-- now and then the whole guest list and the metrics (an orchestrator and
-- a Prometheus scraper).
local guests = tonumber(os.getenv("HR_LOAD_GUESTS") or "1000")
local n = 0

request = function()
  n = n + 1
  local k = n % 100
  local path
  if k < 70 then
    path = "/v1/guests/sim" .. math.random(0, guests - 1)
  elseif k < 85 then
    path = "/v1/host"
  elseif k < 97 then
    path = "/v1/reservations"
  elseif k < 99 then
    path = "/v1/guests"
  else
    path = "/metrics"
  end
  return wrk.format("GET", path)
end
