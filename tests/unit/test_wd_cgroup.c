/* Unit tests for watchdog/cgroup.c on /proc/PID/cgroup texts shaped like
 * the ones the kubelet's cgroupfs and systemd drivers, containerd, CRI-O
 * and Docker produce under cgroup v1 and v2. */
#include <string.h>

#include "harness.h"
#include "watchdog/cgroup.h"

#define CID "0f3c5a8e9d2b4c6a8e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"
#define UID "6b3e2a1c-9d8f-4e7a-b6c5-d4e3f2a1b0c9"
#define UID_ "6b3e2a1c_9d8f_4e7a_b6c5_d4e3f2a1b0c9"

struct cgroup_case {
    const char *name;
    const char *text;
    int rc;
    const char *uid;
    const char *cid;
};

static const struct cgroup_case cases[] = {
    {"v2, systemd driver, containerd, burstable",
     "0::/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID ".scope\n",
     0, UID, CID},
    {"v2, systemd driver, containerd, guaranteed (no QoS slice)",
     "0::/kubepods.slice/kubepods-pod" UID_ ".slice/cri-containerd-" CID
     ".scope\n",
     0, UID, CID},
    {"v2, systemd driver, CRI-O, besteffort",
     "0::/kubepods.slice/kubepods-besteffort.slice/"
     "kubepods-besteffort-pod" UID_ ".slice/crio-" CID ".scope\n",
     0, UID, CID},
    {"v2, CRI-O's conmon is in the pod but is no container",
     "0::/kubepods.slice/kubepods-besteffort.slice/"
     "kubepods-besteffort-pod" UID_ ".slice/crio-conmon-" CID ".scope\n",
     0, UID, ""},
    {"v2, systemd driver, Docker (cri-dockerd)",
     "0::/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod" UID_ ".slice/docker-" CID ".scope\n",
     0, UID, CID},
    {"v2, cgroupfs driver, containerd",
     "0::/kubepods/burstable/pod" UID "/" CID "\n", 0, UID, CID},
    {"v2, cgroupfs driver, guaranteed", "0::/kubepods/pod" UID "/" CID "\n", 0,
     UID, CID},
    {"v2, seen from another cgroup namespace",
     "0::/../../kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID
     ".scope\n",
     0, UID, CID},
    {"v2, a process in a nested cgroup of the container",
     "0::/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID
     ".scope/worker\n",
     0, UID, CID},
    {"v1, cgroupfs driver, Docker-era layout",
     "12:pids:/kubepods/burstable/pod" UID "/" CID "\n"
     "11:memory:/kubepods/burstable/pod" UID "/" CID "\n"
     "10:cpu,cpuacct:/kubepods/burstable/pod" UID "/" CID "\n"
     "1:name=systemd:/kubepods/burstable/pod" UID "/" CID "\n",
     0, UID, CID},
    {"v1, systemd driver, a hierarchy that stops at the pod comes first",
     "13:rdma:/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod" UID_ ".slice\n"
     "12:memory:/kubepods.slice/kubepods-burstable.slice/"
     "kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID ".scope\n",
     0, UID, CID},
    {"not a pod: a systemd service", "0::/system.slice/containerd.service\n",
     -1, NULL, NULL},
    {"not a pod: the root", "0::/\n", -1, NULL, NULL},
    {"not a pod: a user session",
     "0::/user.slice/user-1000.slice/session-3.scope\n", -1, NULL, NULL},
    {"not a pod: a UID with a bad digit",
     "0::/kubepods/burstable/pod6b3e2a1c-9d8f-4e7a-b6c5-d4e3f2a1b0cz/" CID "\n",
     -1, NULL, NULL},
    {"not a pod: dashes where systemd writes underscores",
     "0::/kubepods.slice/kubepods-burstable-pod" UID ".slice\n", -1, NULL,
     NULL},
    {"a malformed line is skipped", "garbage\n0::/kubepods/pod" UID "\n", 0,
     UID, ""},
    {"empty", "", -1, NULL, NULL},
};

int
main(void)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct cgroup_case *c = &cases[i];
        struct wd_podref r;
        int rc;

        memset(&r, 0x41, sizeof(r));
        rc = wd_cgroup_parse(c->text, strlen(c->text), &r);
        if (rc != c->rc)
            fprintf(stderr, "case: %s\n", c->name);
        CHECK_INT(rc, c->rc);
        if (rc != 0 || c->rc != 0)
            continue;
        CHECK_STR(r.pod_uid, c->uid);
        CHECK_STR(r.container_id, c->cid);
    }
    /* Not NUL-terminated: the parser stops at len. */
    {
        static const char text[] = "0::/kubepods/pod" UID "/" CID "XYZ";
        struct wd_podref r;

        CHECK_INT(wd_cgroup_parse(text, sizeof(text) - 4, &r), 0);
        CHECK_STR(r.container_id, CID);
    }
    return harness_finish();
}
