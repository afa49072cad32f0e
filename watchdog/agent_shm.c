/* The watchdog agent: a watched pod's /dev/shm, its use and the segments
 * left behind. */
#include "watchdog/agent_int.h"

/* ---- /dev/shm ----------------------------------------------------------- */

#define SHM_EVENT_PCT 90
#define SHM_REARM_PCT 80
#define MOUNTINFO_MAX (256 * 1024)
#define MAPS_MAX (1 << 20)
#define SHM_MAX_ENTRIES 1024
#define SHM_MAX_MAPPED 4096
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* True when pid's mount table has a tmpfs at /dev/shm (the last mount
 * there wins, as the kernel stacks them). */
static bool
shm_is_tmpfs(struct agent *a, pid_t pid)
{
    ssize_t n = wd_proc_read(a->o->proc_root, pid, "mountinfo", a->tcpbuf,
                             MOUNTINFO_MAX);
    bool tmpfs = false;
    char *line, *save = NULL;

    if (n <= 0)
        return false;
    for (line = strtok_r(a->tcpbuf, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *f[5], *sep, *fs, *p = line;
        int k;

        for (k = 0; k < 5; k++) {
            f[k] = p;
            p = strchr(p, ' ');
            if (p == NULL)
                break;
            *p++ = '\0';
        }
        if (k < 5 || strcmp(f[4], "/dev/shm") != 0)
            continue;
        sep = strstr(p, " - ");
        if (sep == NULL)
            continue;
        fs = sep + 3;
        tmpfs = strncmp(fs, "tmpfs ", 6) == 0;
    }
    return tmpfs;
}

/* The inodes that the pod's live processes map from /dev/shm, from their
 * /proc/PID/maps ("... dev inode /dev/shm/NAME"), sorted. */
static size_t
shm_mapped(struct agent *a, size_t pi, uint64_t *ino, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < a->n_procs; i++) {
        const struct wproc *w = &a->procs[i];
        char *line, *save = NULL;
        ssize_t len;

        if (w->pod != pi || !w->alive)
            continue;
        len =
            wd_proc_read(a->o->proc_root, w->pid, "maps", a->tcpbuf, MAPS_MAX);
        if (len <= 0)
            continue;
        for (line = strtok_r(a->tcpbuf, "\n", &save); line != NULL && n < cap;
             line = strtok_r(NULL, "\n", &save)) {
            unsigned long long inode;
            char *path = strstr(line, " /dev/shm/");
            int fields = 0;
            char *p = line;

            if (path == NULL)
                continue;
            /* The inode is the fifth field. */
            while (fields < 4 && (p = strchr(p, ' ')) != NULL) {
                while (*p == ' ')
                    p++;
                fields++;
            }
            if (p == NULL || sscanf(p, "%llu", &inode) != 1)
                continue;
            ino[n++] = inode;
        }
    }
    qsort(ino, n, sizeof(*ino), wda_u64_cmp);
    return n;
}

/*
 * The pod's /dev/shm: its size and use (statfs through the container's
 * root, only when the mount table says tmpfs, so that no tenant filesystem
 * is asked), one Event when it crosses SHM_EVENT_PCT, and NCCL segments
 * (nccl-*) that no live process of the pod maps any more and that are
 * older than a period: left behind by a process that died.
 */
void
wda_pod_shm(struct agent *a, struct wpod *pod, size_t pi)
{
    const unsigned long long res =
        RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS;
    struct wproc *first = wda_pod_first(a, pi);
    struct open_how how;
    struct statfs sf;
    struct wd_stat st;
    char rp[256];
    int dfd = -1, sfd = -1, lfd = -1;
    DIR *d = NULL;
    struct dirent *de;
    uint64_t *mapped = NULL;
    size_t n_mapped = 0, seen = 0;
    bool looked = false;
    int orphans = 0;

    pod->shm_known = false;
    if (first == NULL || !shm_is_tmpfs(a, first->pid))
        return;
    snprintf(rp, sizeof(rp), "%s/%d/root", a->o->proc_root, (int)first->pid);
    dfd = open(rp, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || wd_proc_stat(a->o->proc_root, first->pid, &st) != 0 ||
        st.start != first->start)
        goto done;
    memset(&how, 0, sizeof(how));
    how.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = res;
    sfd = (int)syscall(SYS_openat2, dfd, "dev/shm", &how, sizeof(how));
    if (sfd < 0 || fstatfs(sfd, &sf) != 0 ||
        (unsigned long)sf.f_type != (unsigned long)TMPFS_MAGIC)
        goto done;
    pod->shm_known = true;
    pod->shm_size = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize;
    pod->shm_used = (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
    if (pod->shm_size > 0 &&
        pod->shm_used * 100 >= pod->shm_size * SHM_EVENT_PCT) {
        if (!pod->shm_reported) {
            char msg[300];

            pod->shm_reported = true;
            snprintf(msg, sizeof(msg),
                     "NCCLShmNearlyFull: /dev/shm %llu%% full (%llu of %llu "
                     "KiB); NCCL's shared-memory segments fail before the "
                     "kubelet evicts the pod at the volume's sizeLimit",
                     (unsigned long long)(pod->shm_used * 100 / pod->shm_size),
                     (unsigned long long)(pod->shm_used >> 10),
                     (unsigned long long)(pod->shm_size >> 10));
            wda_logj(
                a, "shm",
                wda_podj(pod,
                         json_pack("{s:s,s:I,s:I}", "message", msg,
                                   "used_bytes", (json_int_t)pod->shm_used,
                                   "size_bytes", (json_int_t)pod->shm_size)));
            wda_post_event(a, pod, "NCCLShmNearlyFull", msg, "shm");
        }
    } else if (pod->shm_used * 100 < pod->shm_size * SHM_REARM_PCT) {
        pod->shm_reported = false;
    }
    /* Segments left behind: a directory of a tmpfs, read through the
     * O_PATH handle checked above. */
    lfd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
    if (lfd < 0 || (d = fdopendir(lfd)) == NULL)
        goto done;
    lfd = -1; /* owned by d */
    while ((de = readdir(d)) != NULL && seen++ < SHM_MAX_ENTRIES) {
        struct stat fs;
        struct timespec now;
        uint64_t ino;

        if (strncmp(de->d_name, "nccl-", 5) != 0 ||
            fstatat(dirfd(d), de->d_name, &fs, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(fs.st_mode))
            continue;
        clock_gettime(CLOCK_REALTIME, &now);
        if ((long long)(now.tv_sec - fs.st_mtime) * 1000 < pod->spec.period_ms)
            continue; /* being set up */
        if (!looked) {
            mapped = malloc(SHM_MAX_MAPPED * sizeof(*mapped));
            if (mapped == NULL)
                break;
            n_mapped = shm_mapped(a, pi, mapped, SHM_MAX_MAPPED);
            looked = true;
        }
        ino = (uint64_t)fs.st_ino;
        if (n_mapped > 0 && bsearch(&ino, mapped, n_mapped, sizeof(*mapped),
                                    wda_u64_cmp) != NULL)
            continue;
        orphans++;
        {
            bool logged = false;

            for (size_t k = 0; k < pod->n_orphan_ino && !logged; k++)
                logged = pod->shm_orphan_ino[k] == ino;
            if (logged)
                continue;
            if (pod->n_orphan_ino <
                sizeof(pod->shm_orphan_ino) / sizeof(pod->shm_orphan_ino[0]))
                pod->shm_orphan_ino[pod->n_orphan_ino++] = ino;
            wda_logj(
                a, "shm-orphan",
                wda_podj(pod, json_pack("{s:s,s:I,s:s}", "segment", de->d_name,
                                        "bytes", (json_int_t)fs.st_size, "why",
                                        "no live process of the pod maps it: "
                                        "left by a process that died")));
        }
    }
done:
    pod->shm_orphans = orphans;
    free(mapped);
    if (d != NULL)
        closedir(d);
    if (lfd >= 0)
        close(lfd);
    if (sfd >= 0)
        close(sfd);
    if (dfd >= 0)
        close(dfd);
}
