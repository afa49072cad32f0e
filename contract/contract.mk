# contract/: what the webhook writes and the node programs read, in one
# place at the ground floor: the ring check's argument bounds (limits.h),
# the job operators' env names (multinode_env.h), the watchdog spec
# (wdspec.*), the NCCL variable catalog (ncclenv.*) and the profile marker
# (profile_marker.h). Nothing here includes anything above base/; the
# webhook, the ring check and the node agent all include it.
LIB_SRCS += contract/ncclenv.c contract/wdspec.c
UNIT_TESTS += ncclenv
