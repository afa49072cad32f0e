#!/usr/bin/env bash
# The version: `--version` on each binary, the `listening` log line and
# ncclguard_build_info on /metrics all report the same build.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ng_setup

out=$("$NCCLGUARD" --version)
ng_check "ncclguard --version exits 0" test $? -eq 0
ver=${out#ncclguard }
ng_check "ncclguard --version prints 'ncclguard VERSION' (got '$out')" \
    bash -c '[[ $0 =~ ^[0-9]+\.[0-9]+\.[0-9]+([-.+][0-9A-Za-z.-]+)?$ ]]' "$ver"
RC=$(dirname "$NCCLGUARD")/ncclguard-ringcheck
if [ -x "$RC" ]; then
    ng_eq "ncclguard-ringcheck --version names the same build" \
        "$("$RC" --version)" "ncclguard-ringcheck $ver"
else
    echo "SKIP ncclguard-ringcheck --version ($RC not built: no CUDA/NCCL)"
fi

ng_make_ca "$NG_TMP" && ng_make_cert "$NG_TMP" server 1
ng_serve_start --cert "$NG_TMP/server.crt" --key "$NG_TMP/server.key" \
    --policy "$NG_ROOT/policy/default.yaml" || exit 1
ng_eq "listening log line carries the version" \
    "$(sed -n 's/.*"msg":"listening".*"version":"\([^"]*\)".*/\1/p' "$NG_LOG")" \
    "$ver"
ng_eq "/metrics: ncclguard_build_info{version=...} is 1" \
    "$(ng_metric "ncclguard_build_info{version=\"$ver\"}")" 1
ng_serve_stop
ng_summary
