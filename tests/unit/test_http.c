/* Unit tests for server/http: the body budget and the listen address. */
#include "server/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "harness.h"

#define MI (1024ull * 1024)

int
main(void)
{
    /* The body budget: half the limit less four bodies per worker, never
     * below one body; 64 bodies without a limit. */
    static const struct {
        uint64_t limit;
        unsigned int threads;
        size_t max_body;
        size_t want;
    } budgets[] = {
        {256 * MI, 1, 4 * MI, 112 * MI}, /* the Deployment's figure */
        {256 * MI, 0, 4 * MI, 112 * MI}, /* 0 threads counts as one */
        {256 * MI, 4, 4 * MI, 64 * MI},
        {1024 * MI, 8, 4 * MI, 384 * MI},
        {64 * MI, 16, 4 * MI, 4 * MI}, /* floor: one body */
        {0, 1, 4 * MI, 256 * MI},      /* no limit known */
        {256 * MI, 1, 64 * 1024, 128 * MI - 256 * 1024},
    };
    struct http_config cfg;
    struct ng_error e;

    for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++)
        CHECK_INT(http_body_budget(budgets[i].limit, budgets[i].threads,
                                   budgets[i].max_body),
                  budgets[i].want);

    CHECK_INT(http_listen_parse("127.0.0.1:8443", &cfg, &e), 0);
    CHECK_INT(ntohs(((struct sockaddr_in *)&cfg.addr)->sin_port), 8443);
    CHECK_INT(http_listen_parse("[::1]:0", &cfg, &e), 0);
    CHECK_INT(cfg.addr.ss_family, AF_INET6);
    CHECK_INT(http_listen_parse("127.0.0.1:65536", &cfg, &e), -1);
    CHECK(strstr(e.msg, "0-65535") != NULL);
    CHECK_INT(http_listen_parse("nohost:1", &cfg, &e), -1);
    return harness_finish();
}
