#!/usr/bin/env python3
"""Turns the manifests of tests/data/corpus/manifests into AdmissionReview
seeds for the fuzz corpus and the benchmark: one review per pod (template),
dressed the way the apiserver sends a Pod CREATE (defaults, service-account
volume, managedFields). A maintenance tool: its output is checked in, so
neither the tests nor the benchmark need Python or PyYAML."""

import base64
import copy
import hashlib
import json
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
MANIFESTS = os.path.join(ROOT, "tests", "data", "corpus", "manifests")


def pod_templates(node, pointer=""):
    """Yields (pointer, template) for every {metadata?, spec: {containers}}."""
    if isinstance(node, dict):
        spec = node.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            yield pointer, node
            return
        for k, v in node.items():
            yield from pod_templates(v, pointer + "/" + str(k).replace(
                "~", "~0").replace("/", "~1"))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from pod_templates(v, "%s/%d" % (pointer, i))


def apiserver_defaults(pod, name, namespace):
    """Adds what defaulting and the service-account admission plug-in add."""
    meta = pod.setdefault("metadata", {}) or {}
    pod["metadata"] = meta
    meta.setdefault("generateName", name + "-")
    meta["namespace"] = namespace
    meta["creationTimestamp"] = None
    meta["managedFields"] = [{
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2025-06-01T12:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {
            "." : {}}}, "f:spec": {"f:containers": {}}},
    }]
    spec = pod["spec"]
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    spec.setdefault("tolerations", [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
         "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "effect": "NoExecute", "tolerationSeconds": 300}])
    vols = spec.setdefault("volumes", []) or []
    spec["volumes"] = vols
    vols.append({"name": "kube-api-access-x7k2p", "projected": {
        "defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607,
                                     "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [
                {"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}})
    for key in ("initContainers", "containers"):
        for c in spec.get(key) or []:
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            mounts = c.setdefault("volumeMounts", []) or []
            c["volumeMounts"] = mounts
            mounts.append({"name": "kube-api-access-x7k2p", "readOnly": True,
                           "mountPath":
                           "/var/run/secrets/kubernetes.io/serviceaccount"})
    return pod


def fields_v1(node):
    """The managedFields fieldsV1 set for node, as the apiserver writes it."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            out["f:" + k] = fields_v1(v) if isinstance(v, (dict, list)) \
                else {}
        if out:
            out["."] = {}
        return out
    if isinstance(node, list):
        out = {}
        for i, v in enumerate(node):
            if isinstance(v, dict) and "name" in v:
                key = 'k:{"name":"%s"}' % v["name"]
            elif isinstance(v, dict) and "mountPath" in v:
                key = 'k:{"mountPath":"%s"}' % v["mountPath"]
            else:
                key = "v:" + json.dumps(v, separators=(",", ":"))
            out[key] = fields_v1(v) if isinstance(v, dict) else {}
        return out
    return {}


def lws_dress(pod, lws="vllm", group=0, worker=0):
    """What the LeaderWorkerSet controller and the apiserver put on a pod."""
    meta = pod["metadata"]
    meta["name"] = "%s-%d" % (lws, group) if worker == 0 else \
        "%s-%d-%d" % (lws, group, worker)
    meta.pop("generateName", None)
    labels = meta.setdefault("labels", {}) or {}
    meta["labels"] = labels
    labels.update({
        "leaderworkerset.sigs.k8s.io/name": lws,
        "leaderworkerset.sigs.k8s.io/group-index": str(group),
        "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
        "leaderworkerset.sigs.k8s.io/group-key":
            hashlib.sha1(("%s-%d" % (lws, group)).encode()).hexdigest(),
        "leaderworkerset.sigs.k8s.io/template-revision-hash": "5c9d8f7b6d",
        "apps.kubernetes.io/pod-index": str(group),
        "statefulset.kubernetes.io/pod-name": meta["name"],
        "controller-revision-hash": "%s-6f8b9c7d54" % lws,
    })
    annotations = meta.setdefault("annotations", {}) or {}
    meta["annotations"] = annotations
    annotations.update({
        "leaderworkerset.sigs.k8s.io/size": "2",
        "leaderworkerset.sigs.k8s.io/leader-name": "%s-%d" % (lws, group),
        "leaderworkerset.sigs.k8s.io/subgroup-size": "1",
    })
    meta["ownerReferences"] = [{
        "apiVersion": "apps/v1", "kind": "StatefulSet", "name": lws,
        "uid": "4f1c2b9e-8a7d-4c3b-9e2f-1a6b5c4d3e2f", "controller": True,
        "blockOwnerDeletion": True}]
    lws_env = [
        {"name": "LWS_LEADER_ADDRESS",
         "value": "%s-%d.%s.ml-team" % (lws, group, lws)},
        {"name": "LWS_GROUP_SIZE", "value": "2"},
        {"name": "LWS_WORKER_INDEX", "value": str(worker)}]
    for c in pod["spec"]["containers"]:
        c["env"] = lws_env + (c.get("env") or [])
    pod["spec"]["hostname"] = meta["name"]
    pod["spec"]["subdomain"] = lws
    meta["managedFields"] = [{
        "manager": "kube-controller-manager", "operation": "Update",
        "apiVersion": "v1", "time": "2025-06-01T12:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": fields_v1(
            {k: meta[k] for k in ("labels", "annotations", "ownerReferences")}),
            "f:spec": fields_v1({k: pod["spec"][k] for k in (
                "containers", "hostname", "subdomain")})}}]
    return pod


def review(pod, uid, version="v1", operation="CREATE", namespace="default"):
    return {
        "apiVersion": "admission.k8s.io/" + version,
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1",
                                "resource": "pods"},
            "name": "",
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:kube-system:"
                         "replicaset-controller",
                         "uid": "9b2f0d7e-6c1a-4e8e-9d55-0e6b4b0f2a11",
                         "groups": ["system:serviceaccounts",
                                    "system:serviceaccounts:kube-system",
                                    "system:authenticated"]},
            "object": pod,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions",
                        "apiVersion": "meta.k8s.io/v1"},
        },
    }


def uid_for(text):
    h = hashlib.sha256(text.encode()).hexdigest()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])


def corpus_reviews():
    """(name, review) for every pod template of every manifest."""
    for fname in sorted(os.listdir(MANIFESTS)):
        if not fname.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(MANIFESTS, fname)) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        for di, doc in enumerate(docs):
            for ti, (ptr, tmpl) in enumerate(pod_templates(doc)):
                name = ((tmpl.get("metadata") or {}).get("name") or
                        (doc.get("metadata") or {}).get("name") or "pod")
                pod = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": copy.deepcopy(tmpl.get("metadata") or {}),
                       "spec": copy.deepcopy(tmpl["spec"])}
                pod = apiserver_defaults(pod, name, "ml-team")
                tag = "%s-d%d-t%d" % (fname[:-5], di, ti)
                yield tag, review(pod, uid_for(tag), namespace="ml-team")


def big_pod(containers=20, envs=56):
    """About 100 KB: many containers, each with many env vars."""
    spec = {"containers": [], "volumes": []}
    for i in range(containers):
        c = {"name": "worker-%d" % i,
             "image": "nvcr.io/nvidia/pytorch:25.01-py3",
             "command": ["torchrun", "--nnodes=4", "--nproc-per-node=8",
                         "train.py", "--config", "/etc/train/config.yaml"],
             "env": [{"name": "TRAIN_SETTING_%03d" % e,
                      "value": "value-%d-%d-%s" % (i, e, "x" * 24)}
                     for e in range(envs)],
             "resources": {"limits": {"nvidia.com/gpu": "1" if i < 8 else
                                      "0", "memory": "64Gi", "cpu": "8"},
                           "requests": {"memory": "64Gi", "cpu": "8"}},
             "volumeMounts": [{"name": "data-%d" % i,
                               "mountPath": "/data/%d" % i}]}
        spec["containers"].append(c)
        spec["volumes"].append({"name": "data-%d" % i, "persistentVolumeClaim":
                                {"claimName": "train-data-%d" % i}})
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"labels": {"app": "trainer", "team": "a"}},
           "spec": spec}
    return apiserver_defaults(pod, "trainer", "ml-team")


def train_pod(gpus=4):
    """A training pod as a user writes it (the README's trainer: torchrun
    on 4 GPUs, a data volume, a few settings of its own), as the apiserver
    sends it: the webhook adds the profile, /dev/shm, env and the ring
    check."""
    c = {"name": "train", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
         "command": ["torchrun", "--nproc-per-node=%d" % gpus, "train.py",
                     "--config", "/etc/train/config.yaml"],
         "env": [{"name": "HF_HOME", "value": "/data/hf"},
                 {"name": "OMP_NUM_THREADS", "value": "8"},
                 {"name": "NCCL_DEBUG", "value": "WARN"},
                 {"name": "WANDB_PROJECT", "value": "llama-ft"},
                 {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {
                     "name": "wandb", "key": "api-key"}}}],
         "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "32",
                                  "memory": "256Gi"},
                       "requests": {"cpu": "32", "memory": "256Gi"}},
         "volumeMounts": [{"name": "data", "mountPath": "/data"},
                          {"name": "config", "mountPath": "/etc/train"}]}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "trainer", "labels": {"app": "trainer",
                                                      "team": "ml"}},
           "spec": {"restartPolicy": "Never", "containers": [c],
                    "volumes": [
                        {"name": "data", "persistentVolumeClaim": {
                            "claimName": "train-data"}},
                        {"name": "config", "configMap": {
                            "name": "train-config"}}]}}
    pod = apiserver_defaults(pod, "trainer", "ml-team")
    meta = pod["metadata"]
    meta.pop("generateName", None)
    meta["managedFields"] = [{
        "manager": "kubectl-client-side-apply", "operation": "Update",
        "apiVersion": "v1", "time": "2025-06-01T12:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": fields_v1({"labels": meta["labels"]}),
                     "f:spec": fields_v1({"containers": [c],
                                          "volumes": pod["spec"]["volumes"],
                                          "restartPolicy": "Never"})}}]
    return pod


def managed_large_pod(envs=400):
    """A large pod: an 8-GPU trainer whose platform injects a long env
    (hundreds of settings), a log shipper beside it, and the managedFields
    of two managers over all of it, the way a training operator's pods
    reach the webhook."""
    env = [{"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_1,mlx5_2,mlx5_3"},
           {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
           {"name": "MASTER_ADDR", "value": "llama-train-master-0"},
           {"name": "MASTER_PORT", "value": "23456"},
           {"name": "WORLD_SIZE", "value": "4"},
           {"name": "RANK", "value": "0"},
           {"name": "POD_IP", "valueFrom": {"fieldRef": {
               "fieldPath": "status.podIP"}}}]
    env += [{"name": "PLATFORM_SETTING_%03d" % e,
             "value": "team-a/llama-train/%d/%s" % (e, "v" * 40)}
            for e in range(envs)]
    train = {"name": "pytorch", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
             "command": ["torchrun", "--nnodes=4", "--nproc-per-node=8",
                         "train.py"],
             "env": env,
             "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "96",
                                      "memory": "1Ti"},
                           "requests": {"cpu": "96", "memory": "1Ti"}},
             "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    logs = {"name": "log-shipper", "image": "fluent/fluent-bit:3.0",
            "env": env[7:7 + envs // 4],
            "resources": {"limits": {"cpu": "1", "memory": "512Mi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/data",
                              "readOnly": True}]}
    labels = {"training.kubeflow.org/job-name": "llama-train",
              "training.kubeflow.org/operator-name": "pytorchjob-controller",
              "training.kubeflow.org/replica-type": "master",
              "training.kubeflow.org/replica-index": "0",
              "training.kubeflow.org/job-role": "master", "team": "a"}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "llama-train-master-0", "labels": labels},
           "spec": {"restartPolicy": "Never", "containers": [train, logs],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {
                        "claimName": "llama-data"}}]}}
    pod = apiserver_defaults(pod, "llama-train-master-0", "ml-team")
    meta = pod["metadata"]
    meta.pop("generateName", None)
    meta["ownerReferences"] = [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "name": "llama-train", "uid": "0d6f2c1e-5b4a-4e3d-9c8b-7a6f5e4d3c2b",
        "controller": True, "blockOwnerDeletion": True}]
    spec_fields = fields_v1({k: pod["spec"][k] for k in (
        "containers", "volumes", "restartPolicy")})
    meta["managedFields"] = [
        {"manager": "pytorchjob-controller", "operation": "Update",
         "apiVersion": "v1", "time": "2025-06-01T12:00:00Z",
         "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": fields_v1(
             {k: meta[k] for k in ("labels", "ownerReferences")}),
             "f:spec": spec_fields}},
        {"manager": "kube-scheduler", "operation": "Update",
         "apiVersion": "v1", "time": "2025-06-01T12:00:01Z",
         "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {"f:conditions": {".": {}}}}}]
    return pod


def dump(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"), sort_keys=False)
        f.write("\n")


def main():
    out_fuzz = os.path.join(ROOT, "tests", "fuzz", "corpus", "review")
    out_bench = os.path.join(ROOT, "bench", "reviews")
    os.makedirs(out_fuzz, exist_ok=True)
    os.makedirs(out_bench, exist_ok=True)
    reviews = dict(corpus_reviews())
    for tag, r in reviews.items():
        dump(os.path.join(out_fuzz, "corpus-" + tag + ".json"), r)
    # Variants the decoder must route: v1beta1, UPDATE, another kind.
    first = reviews["01-gpu-operator-test-pod-d0-t0"]
    beta = copy.deepcopy(first)
    beta["apiVersion"] = "admission.k8s.io/v1beta1"
    dump(os.path.join(out_fuzz, "v1beta1.json"), beta)
    upd = copy.deepcopy(first)
    upd["request"]["operation"] = "UPDATE"
    upd["request"]["oldObject"] = upd["request"]["object"]
    dump(os.path.join(out_fuzz, "update.json"), upd)
    other = copy.deepcopy(first)
    other["request"]["kind"]["kind"] = "Deployment"
    dump(os.path.join(out_fuzz, "other-kind.json"), other)
    # The first benchmark bodies (kept for make soak and make faults):
    # small, an LWS pod of llm-d, a 100 KB pod of 20 containers.
    small = copy.deepcopy(first)
    del small["request"]["object"]["metadata"]["managedFields"]
    small["request"]["object"]["spec"]["automountServiceAccountToken"] = False
    del small["request"]["object"]["spec"]["volumes"][-1]
    if not small["request"]["object"]["spec"]["volumes"]:
        del small["request"]["object"]["spec"]["volumes"]
    for c in small["request"]["object"]["spec"]["containers"]:
        del c["volumeMounts"][-1]
        if not c["volumeMounts"]:
            del c["volumeMounts"]
    dump(os.path.join(out_bench, "small.json"), small)
    medium = copy.deepcopy(reviews["14-llm-d-wide-ep-decode-lws-d0-t0"])
    lws_dress(medium["request"]["object"], "wide-ep-llm-d-decode")
    dump(os.path.join(out_bench, "medium.json"), medium)
    dump(os.path.join(out_fuzz, "lws-dressed.json"), medium)
    dump(os.path.join(out_bench, "large.json"),
         review(big_pod(), uid_for("large")))
    nongpu = [r for t, r in reviews.items() if "38-production" in t][0]
    dump(os.path.join(out_bench, "nongpu.json"), nongpu)
    # The pods the webhook exists for (make bench's small, medium and large):
    # a 4-GPU training pod that gets the ring check, the leader of vLLM's
    # LeaderWorkerSet example, and a large pod with managedFields and a
    # long env.
    dump(os.path.join(out_bench, "train-4gpu.json"),
         review(train_pod(), uid_for("train-4gpu"), namespace="ml-team"))
    leader = copy.deepcopy(reviews["10-lws-vllm-multinode-d0-t0"])
    lws_dress(leader["request"]["object"], "vllm")
    dump(os.path.join(out_bench, "lws-leader.json"), leader)
    dump(os.path.join(out_bench, "managed-large.json"),
         review(managed_large_pod(), uid_for("managed-large"),
                namespace="ml-team"))
    for f in sorted(os.listdir(out_bench)):
        print(f, os.path.getsize(os.path.join(out_bench, f)), file=sys.stderr)


if __name__ == "__main__":
    main()
