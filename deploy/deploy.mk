# deploy/: kustomize rendering checks.
