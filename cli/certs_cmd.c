/* ncclguard certs create | inspect | webhook-config: the command line. */
#include "cli/cmd.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "certs/certs.h"
#include "policy/policy.h"

/* Exit statuses: 0 success, 1 a check or an operation failed, 2 usage. */
#define EXIT_FAIL 1
#define EXIT_USAGE 2

static const char usage_head[] = "usage: ncclguard certs <command> [options]\n";

static const char help_create[] =
    "  create --service S --namespace NS --out DIR [--days 365]\n"
    "         [--ca-days 3650] [--key ec|rsa] [--san NAME|IP]... [--ca-dir "
    "DIR]\n"
    "         [--renew-before DAYS [--current DIR]]\n"
    "      Create a CA (or reuse ca.crt and ca.key found in --ca-dir, default\n"
    "      --out) and a serving certificate signed by it. Writes ca.crt,\n"
    "      ca.key, tls.crt and tls.key (keys mode 0600) and prints the base64\n"
    "      caBundle on stdout. With --renew-before, the tls.crt and tls.key\n"
    "      in --current (default --out) are kept, and copied to --out, while\n"
    "      they are signed by that CA, name every SAN and have more than DAYS\n"
    "      days left; otherwise a new pair is issued.\n";

static const char help_inspect[] =
    "  inspect FILE [--ca FILE] [--check-host NAME|IP] [--renew-before "
    "DAYS]\n"
    "      Print a certificate; check that it is valid now, that it chains to\n"
    "      --ca, that it names the host and that it has more than DAYS days\n"
    "      left. Exit 1 when a check fails, 2 on bad input.\n";

static const char help_webhook[] =
    "  webhook-config --ca-file ca.crt | --ca-bundle-file FILE\n"
    "         [--service ncclguard] [--namespace ncclguard] [--name "
    "ncclguard]\n"
    "         [--policy FILE] [--ca-bundle-only] [--output FILE]\n"
    "      Render the MutatingWebhookConfiguration with its caBundle: from a\n"
    "      PEM CA certificate (--ca-file) or a file holding the base64\n"
    "      caBundle that `create` prints (--ca-bundle-file). Its CEL\n"
    "      condition sends pods that ask for any extended resource, or only\n"
    "      for the GPU resources of --policy. --ca-bundle-only writes a\n"
    "      strategic merge patch that sets the caBundle and nothing else.\n";

/* Prints the help of one subcommand, or of all when cmd is NULL or not
 * one of them. */
static void
usage_print(FILE *out, const char *cmd)
{
    static const struct {
        const char *name, *text;
    } helps[] = {{"create", help_create},
                 {"inspect", help_inspect},
                 {"webhook-config", help_webhook}};
    bool one = false;

    for (size_t i = 0; cmd != NULL && i < sizeof(helps) / sizeof(helps[0]);
         i++) {
        if (strcmp(cmd, helps[i].name) == 0) {
            fprintf(out, "usage: ncclguard certs %s [options]\n\n%s",
                    helps[i].name, helps[i].text);
            one = true;
        }
    }
    if (one)
        return;
    fprintf(out, "%s", usage_head);
    for (size_t i = 0; i < sizeof(helps) / sizeof(helps[0]); i++)
        fprintf(out, "\n%s", helps[i].text);
}

/*
 * The next option of a subcommand (argv[0] is its name), by getopt_long:
 * "--opt value" and "--opt=value" both work. A bad option is reported in
 * the command's own words. Returns the option's value from longopts, -1 at
 * the end, or '?' after reporting a bad one.
 */
static int
opt_next(const char *cmd, int argc, char **argv, const struct option *longopts)
{
    int c = getopt_long(argc, argv, ":", longopts, NULL);

    if (c == ':') {
        fprintf(stderr, "ncclguard certs: %s needs a value\n",
                argv[optind - 1]);
        return '?';
    }
    if (c == '?')
        fprintf(stderr, "ncclguard certs %s: unknown option '%s'\n", cmd,
                argv[optind - 1]);
    return c;
}

/* Parses a whole number of days in [min, CERTS_MAX_DAYS]. */
static int
days_parse(const char *opt, const char *s, int min, int *out)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || errno != 0 || v < min ||
        v > CERTS_MAX_DAYS) {
        fprintf(stderr,
                "ncclguard certs: invalid %s '%s': expected a whole number "
                "of days from %d to %d\n",
                opt, s, min, CERTS_MAX_DAYS);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int
create_run(int argc, char **argv)
{
    struct certs_create_opts o = {.days = 365, .ca_days = 3650};
    struct certs_create_result res = {0};
    static const struct option longopts[] = {
        {"service", required_argument, NULL, 's'},
        {"namespace", required_argument, NULL, 'n'},
        {"out", required_argument, NULL, 'o'},
        {"ca-dir", required_argument, NULL, 'C'},
        {"days", required_argument, NULL, 'd'},
        {"ca-days", required_argument, NULL, 'D'},
        {"key", required_argument, NULL, 'k'},
        {"san", required_argument, NULL, 'a'},
        {"renew-before", required_argument, NULL, 'r'},
        {"current", required_argument, NULL, 'c'},
        {NULL, 0, NULL, 0}};
    const char *sans[CERTS_MAX_SANS];
    struct ng_error err = {0};
    int c;

    optind = 0; /* a fresh scan for each subcommand */
    while ((c = opt_next("create", argc, argv, longopts)) != -1) {
        switch (c) {
        case 's':
            o.service = optarg;
            break;
        case 'n':
            o.ns = optarg;
            break;
        case 'o':
            o.out_dir = optarg;
            break;
        case 'C':
            o.ca_dir = optarg;
            break;
        case 'd':
            if (days_parse("--days", optarg, 0, &o.days) != 0)
                return EXIT_USAGE;
            break;
        case 'D':
            if (days_parse("--ca-days", optarg, 1, &o.ca_days) != 0)
                return EXIT_USAGE;
            break;
        case 'k':
            if (strcmp(optarg, "ec") == 0) {
                o.key_type = CERTS_KEY_EC;
            } else if (strcmp(optarg, "rsa") == 0) {
                o.key_type = CERTS_KEY_RSA;
            } else {
                fprintf(stderr,
                        "ncclguard certs: invalid --key '%s': expected ec or "
                        "rsa\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'a':
            if (o.n_sans >= CERTS_MAX_SANS) {
                fprintf(stderr, "ncclguard certs: too many --san: at most %d\n",
                        CERTS_MAX_SANS);
                return EXIT_USAGE;
            }
            sans[o.n_sans++] = optarg;
            break;
        case 'r':
            if (days_parse("--renew-before", optarg, 1, &o.renew_before_days) !=
                0)
                return EXIT_USAGE;
            o.renew = true;
            break;
        case 'c':
            o.current_dir = optarg;
            break;
        default:
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ncclguard certs create: unexpected argument '%s'\n",
                argv[optind]);
        return EXIT_USAGE;
    }
    if (o.current_dir != NULL && !o.renew) {
        fprintf(stderr, "ncclguard certs create: --current needs "
                        "--renew-before\n");
        return EXIT_USAGE;
    }
    if (o.service == NULL || o.ns == NULL || o.out_dir == NULL) {
        fprintf(stderr, "ncclguard certs create: --service, --namespace and "
                        "--out are required\n");
        return EXIT_USAGE;
    }
    o.sans = sans;
    if (certs_create(&o, &res, &err) != 0) {
        fprintf(stderr, "ncclguard certs create: %s\n", err.msg);
        return EXIT_FAIL;
    }
    if (res.warning[0] != '\0')
        fprintf(stderr, "ncclguard certs create: warning: %s\n", res.warning);
    if (o.renew)
        fprintf(stderr, "ncclguard certs create: %s: %s\n",
                res.kept ? "kept the serving certificate"
                         : "issued a new serving certificate",
                res.reason);
    fprintf(stderr,
            "ncclguard certs create: %s CA; wrote %s/{ca.crt,ca.key,tls.crt,"
            "tls.key}; the serving certificate has %lld days left\n",
            res.ca_reused ? "reused the" : "created a new", o.out_dir,
            res.seconds_left > 0 ? res.seconds_left / 86400 : 0);
    printf("%s\n", res.ca_bundle);
    certs_create_result_release(&res);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "ncclguard certs create: cannot write stdout\n");
        return EXIT_FAIL;
    }
    return 0;
}

static int
inspect_run(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ca", required_argument, NULL, 'c'},
        {"check-host", required_argument, NULL, 'h'},
        {"renew-before", required_argument, NULL, 'r'},
        {NULL, 0, NULL, 0}};
    const char *file = NULL, *ca = NULL, *host = NULL;
    struct ng_error err = {0};
    enum certs_status st;
    int c, renew_before = 0;

    optind = 0;
    while ((c = opt_next("inspect", argc, argv, longopts)) != -1) {
        switch (c) {
        case 'c':
            ca = optarg;
            break;
        case 'h':
            host = optarg;
            break;
        case 'r':
            if (days_parse("--renew-before", optarg, 1, &renew_before) != 0)
                return EXIT_USAGE;
            break;
        default:
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        file = argv[optind++];
    if (optind < argc) {
        fprintf(stderr,
                "ncclguard certs inspect: one FILE only ('%s' is extra)\n",
                argv[optind]);
        return EXIT_USAGE;
    }
    if (file == NULL) {
        fprintf(stderr, "ncclguard certs inspect: no FILE given\n");
        return EXIT_USAGE;
    }
    if (host != NULL && host[0] == '\0') {
        fprintf(stderr, "ncclguard certs inspect: --check-host is empty\n");
        return EXIT_USAGE;
    }
    st = certs_inspect(file, ca, host, renew_before, stdout, &err);
    fflush(stdout);
    if (st != CERTS_OK) {
        fprintf(stderr, "ncclguard certs inspect: %s\n", err.msg);
        return st == CERTS_BAD_INPUT ? EXIT_USAGE : EXIT_FAIL;
    }
    return 0;
}

static int
webhook_run(int argc, char **argv)
{
    struct certs_webhook_opts o = {
        .name = "ncclguard", .service = "ncclguard", .ns = "ncclguard"};
    const char *ca_file = NULL, *bundle_file = NULL, *output = NULL;
    const char *policy_file = NULL;
    struct policy *policy = NULL;
    static const struct option longopts[] = {
        {"service", required_argument, NULL, 's'},
        {"namespace", required_argument, NULL, 'n'},
        {"name", required_argument, NULL, 'N'},
        {"ca-file", required_argument, NULL, 'f'},
        {"ca-bundle-file", required_argument, NULL, 'b'},
        {"output", required_argument, NULL, 'o'},
        {"policy", required_argument, NULL, 'p'},
        {"ca-bundle-only", no_argument, NULL, 'B'},
        {NULL, 0, NULL, 0}};
    struct ng_error err = {0};
    bool bundle_only = false;
    char *bundle = NULL;
    FILE *out = stdout;
    int c, rc = EXIT_FAIL;

    optind = 0;
    while ((c = opt_next("webhook-config", argc, argv, longopts)) != -1) {
        switch (c) {
        case 's':
            o.service = optarg;
            break;
        case 'n':
            o.ns = optarg;
            break;
        case 'N':
            o.name = optarg;
            break;
        case 'f':
            ca_file = optarg;
            break;
        case 'b':
            bundle_file = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        case 'p':
            policy_file = optarg;
            break;
        case 'B':
            bundle_only = true;
            break;
        default:
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr,
                "ncclguard certs webhook-config: unexpected argument '%s'\n",
                argv[optind]);
        return EXIT_USAGE;
    }
    if (bundle_only && policy_file != NULL) {
        fprintf(stderr, "ncclguard certs webhook-config: --ca-bundle-only "
                        "writes no CEL condition: drop --policy\n");
        return EXIT_USAGE;
    }
    if ((ca_file == NULL) == (bundle_file == NULL)) {
        fprintf(stderr, "ncclguard certs webhook-config: give exactly one of "
                        "--ca-file and --ca-bundle-file\n");
        return EXIT_USAGE;
    }
    bundle = ca_file != NULL ? certs_ca_bundle_from_file(ca_file, &err)
                             : certs_ca_bundle_load(bundle_file, &err);
    if (bundle == NULL) {
        fprintf(stderr, "ncclguard certs webhook-config: %s\n", err.msg);
        return EXIT_FAIL;
    }
    o.ca_bundle = bundle;
    if (policy_file != NULL) {
        const struct settings *set;
        char msg[700];

        policy = policy_load_file(policy_file, &err);
        if (policy == NULL) {
            fprintf(stderr, "ncclguard certs webhook-config: %s\n",
                    ng_error_format(&err, policy_file, msg, sizeof(msg)));
            goto out;
        }
        set = policy_defaults(policy);
        o.gpu_resources = (const char *const *)set->gpu_resources;
        o.n_gpu_resources = set->n_gpu_resources;
    }
    if (output != NULL) {
        out = fopen(output, "w");
        if (out == NULL) {
            fprintf(stderr,
                    "ncclguard certs webhook-config: cannot open %s: %s\n",
                    output, strerror(errno));
            goto out;
        }
    }
    if ((bundle_only ? certs_webhook_ca_patch_write(&o, out, &err)
                     : certs_webhook_write(&o, out, &err)) != 0) {
        fprintf(stderr, "ncclguard certs webhook-config: %s\n", err.msg);
        goto out;
    }
    rc = 0;
out:
    if (out != NULL && out != stdout && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "ncclguard certs webhook-config: cannot write %s\n",
                output);
        rc = EXIT_FAIL;
    }
    policy_free(policy);
    free(bundle);
    return rc;
}

int
cmd_certs(int argc, char **argv)
{
    if (argc < 2) {
        usage_print(stderr, NULL);
        return EXIT_USAGE;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage_print(stdout, i > 1 ? argv[1] : NULL);
            return 0;
        }
    }
    if (strcmp(argv[1], "create") == 0)
        return create_run(argc - 1, argv + 1);
    if (strcmp(argv[1], "inspect") == 0)
        return inspect_run(argc - 1, argv + 1);
    if (strcmp(argv[1], "webhook-config") == 0)
        return webhook_run(argc - 1, argv + 1);
    fprintf(stderr, "ncclguard certs: unknown command '%s'\n", argv[1]);
    usage_print(stderr, NULL);
    return EXIT_USAGE;
}
