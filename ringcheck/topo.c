/* Reads the PCIe path between two GPUs from sysfs. */
#include "ringcheck/topo.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOPS 16

/* "00000000:18:00.0" (CUDA) to "0000:18:00.0" (sysfs), lower case. */
static int
sysfs_id(const char *busid, char *out, size_t len)
{
    const char *colon = strchr(busid, ':');
    size_t dom = colon != NULL ? (size_t)(colon - busid) : 0;
    int n;

    if (colon == NULL || dom < 4)
        return -1;
    n = snprintf(out, len, "%s", busid + dom - 4);
    if (n < 0 || (size_t)n >= len)
        return -1;
    for (char *p = out; *p != '\0'; p++)
        *p = (char)tolower((unsigned char)*p);
    return 0;
}

/* The components of the device's real path below "/devices/":
 * "pci0000:17", "0000:17:00.0", ..., the device itself last. */
static int
device_chain(const char *root, const char *busid, char hops[][32], int *n,
             int *numa)
{
    char id[32], path[PATH_MAX + 32], real[PATH_MAX];
    const char *p;
    FILE *f;

    *n = 0;
    *numa = -1;
    if (sysfs_id(busid, id, sizeof(id)) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/bus/pci/devices/%s", root, id);
    if (realpath(path, real) == NULL)
        return -1;
    p = strstr(real, "/devices/");
    if (p == NULL)
        return -1;
    p += strlen("/devices/");
    while (*p != '\0' && *n < MAX_HOPS) {
        size_t l = strcspn(p, "/");

        snprintf(hops[*n], 32, "%.*s", (int)l, p);
        (*n)++;
        p += l;
        if (*p == '/')
            p++;
    }
    snprintf(path, sizeof(path), "%s/numa_node", real);
    f = fopen(path, "re");
    if (f != NULL) {
        if (fscanf(f, "%d", numa) != 1)
            *numa = -1;
        fclose(f);
    }
    return *n >= 2 ? 0 : -1;
}

const char *
topo_pci_path(const char *sysfs_root, const char *a, const char *b, char *out,
              size_t len)
{
    char ha[MAX_HOPS][32], hb[MAX_HOPS][32];
    int na, nb, numa_a, numa_b, k = 0, bridges;
    const char *word;

    out[0] = '\0';
    if (device_chain(sysfs_root, a, ha, &na, &numa_a) != 0 ||
        device_chain(sysfs_root, b, hb, &nb, &numa_b) != 0)
        return NULL;
    while (k < na - 1 && k < nb - 1 && strcmp(ha[k], hb[k]) == 0)
        k++;
    if (k == 0) {
        /* Different root complexes (host bridges). */
        word = numa_a >= 0 && numa_a == numa_b ? "NODE" : "SYS";
    } else if (k == 1) {
        /* Only the host bridge is shared. */
        word = "PHB";
    } else {
        /* Bridges below the common one on each side, plus that one. */
        bridges = (na - 1 - k) + (nb - 1 - k) + 1;
        word = bridges <= 1 ? "PIX" : "PXB";
    }
    snprintf(out, len, "%s", word);
    return out;
}

int
topo_path_via_cpu(const char *word)
{
    return strcmp(word, "PHB") == 0 || strcmp(word, "NODE") == 0 ||
           strcmp(word, "SYS") == 0;
}
