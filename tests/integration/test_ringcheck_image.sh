#!/usr/bin/env bash
# --ringcheck-image / NCCLGUARD_RINGCHECK_IMAGE: the image the webhook
# injects when the policy names none (deploy/ sets it so that kustomize's
# images: reaches it); a policy's own image still wins. Errors in values
# from the environment name the variable.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ng_setup
ng_make_ca "$NG_TMP" && ng_make_cert "$NG_TMP" server 1
REVIEW=$NG_ROOT/deploy/examples/admissionreview-gpu-pod.json

# injected_image: the image of the ncclguard-ringcheck init container in
# the patch the running server answers REVIEW with.
injected_image() {
    ng_post "$REVIEW" | head -n 1 | jq -r .response.patch | base64 -d |
        jq -r '[.. | objects | select(.name? == "ncclguard-ringcheck") |
                .image] | first // "none"'
}

NCCLGUARD_RINGCHECK_IMAGE=registry.example.com/ml/ncclguard-ringcheck:9.9 \
    ng_serve_start --cert "$NG_TMP/server.crt" --key "$NG_TMP/server.key" \
    --policy "$NG_ROOT/policy/default.yaml" || exit 1
ng_eq "NCCLGUARD_RINGCHECK_IMAGE is the injected image" "$(injected_image)" \
    registry.example.com/ml/ncclguard-ringcheck:9.9
ng_serve_stop

cat >"$NG_TMP/own-image.yaml" <<'EOP'
apiVersion: ncclguard.io/v1alpha1
kind: Policy
defaults:
  ringCheck: {image: "mirror.example.com/rc:1"}
EOP
ng_serve_start --cert "$NG_TMP/server.crt" --key "$NG_TMP/server.key" \
    --policy "$NG_TMP/own-image.yaml" \
    --ringcheck-image registry.example.com/ml/ncclguard-ringcheck:9.9 || exit 1
ng_eq "a policy's own ringCheck.image wins over --ringcheck-image" \
    "$(injected_image)" mirror.example.com/rc:1
ng_serve_stop

out=$(NCCLGUARD_RINGCHECK_IMAGE='bad image' "$NCCLGUARD" serve --cert x \
    --key x --policy x 2>&1)
ng_eq "an image with a space is a usage error" "$?" 2
ng_contains "... naming the variable" "$out" "NCCLGUARD_RINGCHECK_IMAGE=bad image:"

# Regression: NCCLGUARD_LOG_LEVEL=verbose said "--log-level verbose", a
# flag the user never typed.
out=$(NCCLGUARD_LOG_LEVEL=verbose "$NCCLGUARD" serve --cert x --key x \
    --policy x 2>&1)
ng_contains "a bad NCCLGUARD_LOG_LEVEL names the variable" "$out" \
    "NCCLGUARD_LOG_LEVEL=verbose: expected debug, info, warn or error"
out=$(NCCLGUARD_LOG_LEVEL=verbose "$NCCLGUARD" serve --cert x --key x \
    --policy x --log-level loud 2>&1)
ng_contains "a flag over the variable is named as the flag" "$out" \
    "--log-level loud: expected"
out=$(NCCLGUARD_THREADS=many "$NCCLGUARD" serve --cert x --key x \
    --policy x 2>&1)
ng_contains "a bad NCCLGUARD_THREADS names the variable" "$out" \
    "NCCLGUARD_THREADS=many: expected a whole number"
ng_summary
