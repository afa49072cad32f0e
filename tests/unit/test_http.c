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
    /* Each form the listen address takes, and the edges of the port. */
    {
        static const struct {
            const char *s;
            int rc, family;
            unsigned port;
            const char *addr; /* what inet_ntop gives, or NULL */
        } cases[] = {
            {":8443", 0, AF_INET, 8443, "0.0.0.0"},
            {"0.0.0.0:1", 0, AF_INET, 1, "0.0.0.0"},
            {"localhost:2", 0, AF_INET, 2, "127.0.0.1"},
            {"10.0.0.1:65535", 0, AF_INET, 65535, "10.0.0.1"},
            {"[::]:3", 0, AF_INET6, 3, "::"},
            {"[fe80::1]:0", 0, AF_INET6, 0, "fe80::1"},
            {"", -1, 0, 0, NULL},
            {"8443", -1, 0, 0, NULL},
            {"127.0.0.1:", -1, 0, 0, NULL},
            {"127.0.0.1:1x", -1, 0, 0, NULL},
            {"127.0.0.1:-1", -1, 0, 0, NULL},
            {"127.0.0.1:+1", -1, 0, 0, NULL},
            {"[::1]", -1, 0, 0, NULL},
            {"[::1:8443", -1, 0, 0, NULL},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            char text[64] = "";
            int rc = http_listen_parse(cases[i].s, &cfg, &e);

            if (rc != cases[i].rc)
                fprintf(stderr, "listen '%s': %d, want %d\n", cases[i].s, rc,
                        cases[i].rc);
            CHECK_INT(rc, cases[i].rc);
            if (rc != 0 || cases[i].rc != 0)
                continue;
            CHECK_INT(cfg.addr.ss_family, cases[i].family);
            if (cases[i].family == AF_INET) {
                struct sockaddr_in *a = (struct sockaddr_in *)&cfg.addr;

                inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
                CHECK_INT(ntohs(a->sin_port), cases[i].port);
                CHECK_INT(cfg.addr_len, sizeof(*a));
            } else {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&cfg.addr;

                inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
                CHECK_INT(ntohs(a->sin6_port), cases[i].port);
                CHECK_INT(cfg.addr_len, sizeof(*a));
            }
            CHECK_STR(text, cases[i].addr);
        }
    }
    return harness_finish();
}
