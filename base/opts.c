/* Command-line values shared by the node programs (see opts.h). */
#include "base/opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
opts_long(const char *v, long min, long max, long *out)
{
    char *end;
    long x;

    errno = 0;
    x = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || x < min || x > max)
        return -1;
    *out = x;
    return 0;
}

const char *
opts_in_cluster_api(char *buf, size_t n)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");

    if (host == NULL || port == NULL)
        return NULL;
    snprintf(buf, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s",
             host, port);
    return buf;
}
