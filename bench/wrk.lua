-- wrk script for make bench: POSTs the review in $BODY as
-- application/json on every keep-alive request and prints one
-- machine-readable summary line from done().
local f = assert(io.open(os.getenv("BODY"), "rb"))
local body = f:read("*a")
f:close()

wrk.method = "POST"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "wrk_result requests=%d duration_us=%d socket_errors=%d non2xx=%d " ..
        "rps=%.1f p50_us=%d p99_us=%d p999_us=%d max_us=%d\n",
        summary.requests, summary.duration,
        e.connect + e.read + e.write + e.timeout, e.status,
        summary.requests / (summary.duration / 1e6),
        latency:percentile(50), latency:percentile(99),
        latency:percentile(99.9), latency.max))
end
