/* The PCIe path between two GPUs, read from sysfs without NVML, in the
 * words of `nvidia-smi topo -m`. */
#ifndef NCCLGUARD_RINGCHECK_TOPO_H
#define NCCLGUARD_RINGCHECK_TOPO_H

#include <stddef.h>

/*
 * Classifies the PCIe path between the devices with CUDA bus ids a and b
 * ("00000000:18:00.0") from SYSFS/bus/pci/devices/ID, whose real paths
 * name the bridges above each device:
 *   "PIX"  through one PCIe bridge (switch) at most
 *   "PXB"  through several bridges, not the host bridge
 *   "PHB"  through the PCIe host bridge (the CPU)
 *   "NODE" between host bridges within one NUMA node
 *   "SYS"  across the interconnect between NUMA nodes (QPI/UPI, xGMI)
 * Writes the word into out and returns it, or writes "" and returns NULL
 * when sysfs does not say. Thread-safe.
 */
const char *topo_pci_path(const char *sysfs_root, const char *a, const char *b,
                          char *out, size_t len);

/* Whether a path word goes through the CPU (PHB, NODE, SYS). */
int topo_path_via_cpu(const char *word);

#endif
