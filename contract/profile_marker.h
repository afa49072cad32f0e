/* How a pod can tell that its namespace holds the platform's NCCL profile:
 * a marker key in the profile ConfigMap, shared by the webhook (which
 * writes the expected name), policy lint (which checks the ConfigMap) and
 * the ring check (which compares the two at start). */
#ifndef NCCLGUARD_CONTRACT_PROFILE_MARKER_H
#define NCCLGUARD_CONTRACT_PROFILE_MARKER_H

/* A data key of the profile ConfigMap whose value is the ConfigMap's own
 * name. envFrom turns it into a variable of every container that loads
 * the profile, so a container without it started without the profile
 * (the ConfigMap is missing in its namespace: envFrom is optional). */
#define PROFILE_MARKER_KEY "NCCLGUARD_PROFILE"

/* Set by the webhook on the ring-check init container only: the profile
 * name the policy expects. The check warns, loudly and in its report,
 * when PROFILE_MARKER_KEY is unset or holds another name. */
#define PROFILE_EXPECTED_ENV "NCCLGUARD_PROFILE_EXPECTED"

#endif
