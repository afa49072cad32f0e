/* Which pod and container a process belongs to, from /proc/PID/cgroup. */
#ifndef NCCLGUARD_WD_CGROUP_H
#define NCCLGUARD_WD_CGROUP_H

#include <stddef.h>

/* A pod UID (lower-case, with dashes) and a container ID (64 hex digits,
 * "" when the process sits in the pod's cgroup itself). */
struct wd_podref {
    char pod_uid[37];
    char container_id[65];
};

/*
 * Finds the pod and container in the text of a /proc/PID/cgroup file
 * (buf, len; need not be NUL-terminated). Understands cgroup v1 (one line
 * per hierarchy) and v2 ("0::/path"), the kubelet's cgroupfs driver
 * (/kubepods/burstable/pod<uid>/<id>) and its systemd driver
 * (kubepods-burstable-pod<uid_with_underscores>.slice/<runtime>-<id>.scope)
 * with containerd (cri-containerd-), CRI-O (crio-) and Docker (docker-)
 * scopes, and paths relative to another cgroup namespace ("/../../...").
 * CRI-O's conmon scope is not a container. Returns 0 and fills *out, or -1
 * when the process is in no pod (*out untouched). Thread-safe.
 */
int wd_cgroup_parse(const char *buf, size_t len, struct wd_podref *out)
    __attribute__((warn_unused_result));

#endif
