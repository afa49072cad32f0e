/* The Events on a Node that carry evidence from one ncclguard program to
 * the node loop of that Node (docs/nodeloop.md, "Evidence"): their reasons
 * and the annotation that holds the evidence itself. The watchdog posts
 * the lost-GPU Event, the node loop of one node posts the pair Event on the
 * other node; the node loop of the named node reads both. */
#ifndef NCCLGUARD_NODEEVENT_H
#define NCCLGUARD_NODEEVENT_H

/* NVML reported GPU_IS_LOST on a GPU of a watched pod (watchdog). */
#define NG_EVENT_GPU_LOST "NCCLGPULost"

/* A cross-node ring check failed between the poster's node and this one
 * (node loop). */
#define NG_EVENT_PAIR "NCCLNodePairFailed"

/*
 * The Event's annotation with the evidence, one JSON object:
 *   key    "<pod uid>/<what>": the same verdict is counted once
 *   pod    "<namespace>/<name>" of the pod that saw it
 *   node   the node of that pod (the poster's node)
 *   reason a CamelCase rule name ("GPULost", "NodePairFails")
 *   at     when, in milliseconds since the epoch
 *   gpus   the lost GPUs ("0,3"), lost-GPU Events only
 */
#define NG_EVIDENCE_ANN "ncclguard.io/evidence"

/* Every Event of these reasons lives in this namespace (Node Events have
 * no namespace of their own; kubectl describe node looks there). */
#define NG_NODE_EVENT_NS "default"

#endif
