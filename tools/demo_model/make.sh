#!/usr/bin/env bash
# Re-makes models/demo from nothing: simulates the labelled training posts (a scenario of its own,
# tools/demo_model/train_scenario.yaml) and the default scenario's posts (held out: its events are
# never seen in training), then trains and exports the model on the CPU (about 40 minutes on 2
# cores). Needs a built surge (scripts/test or scripts/demo) and Debian's python3-torch.
#
#   tools/demo_model/make.sh [OUT_DIR]      (default models/demo)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-models/demo}"
work=build/demo_model
surge=build/release/bin/surge
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
for p in python3-torch libopenblas0-pthread python3-venv; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    $SUDO apt-get install -y -qq --no-install-recommends "$p"
done
if [ ! -x "$work/venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$work/venv"
  "$work/venv/bin/python" -m pip install -q -r tools/demo_model/requirements.txt
fi
mkdir -p "$work"
"$surge" simulate --scenario tools/demo_model/train_scenario.yaml --out "$work/train_posts.jsonl" \
  --truth "$work/train_truth.json" --labels "$work/train_labels.jsonl"
"$surge" simulate --out "$work/posts.jsonl" --truth "$work/truth.json" --labels "$work/labels.jsonl"
"$work/venv/bin/python" tools/demo_model/train.py --posts "$work/train_posts.jsonl" \
  --labels "$work/train_labels.jsonl" --eval-posts "$work/posts.jsonl" \
  --eval-labels "$work/labels.jsonl" --out "$out" --hf-out "$out/hf"
"$work/venv/bin/python" tools/demo_model/hf_reference.py --model "$out" --hf "$out/hf"
