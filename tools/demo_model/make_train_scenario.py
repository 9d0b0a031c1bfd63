#!/usr/bin/env python3
"""Writes the demo model's training scenario: the default scenario's categories, lexicon and
templates (read from `surge simulate --print-scenario`), with its own seed and many synthetic
events, so the keyword head learns where an event phrase sits in a post rather than memorising a
few phrases. No phrase of the default scenario (what `surge eval` scores) is used.

    python3 tools/demo_model/make_train_scenario.py --surge build/release/bin/surge --out F
"""
import argparse
import random
import subprocess

import yaml

SUFFIXES = ["事件", "风波", "突破", "上线", "官宣", "暴涨", "降价", "曝光", "夺冠", "发布", "停运",
            "涨价", "召回", "刷屏", "回应", "开幕", "爆满", "预警", "首发", "出圈"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--surge", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--events", type=int, default=48)
    ap.add_argument("--seed", type=int, default=20261202)
    a = ap.parse_args()
    default = yaml.safe_load(subprocess.run([a.surge, "simulate", "--print-scenario"], check=True,
                                            capture_output=True, text=True).stdout)
    taken = {e["phrase"] for e in default["events"]} | {s["phrase"] for s in default["spam"]}
    rng = random.Random(a.seed)
    cats = default["categories"]
    duration_min = 30
    events, phrases = [], set()
    while len(events) < a.events:
        c = cats[len(events) % len(cats)]
        w1, w2, *terms = rng.sample(c["seed_words"], 5)
        phrase = w1 + rng.choice([w2, rng.choice(SUFFIXES)])
        if phrase in taken or phrase in phrases or any(p in phrase or phrase in p for p in taken):
            continue
        phrases.add(phrase)
        pos = rng.uniform(0.05, 0.8)
        neg = rng.uniform(0.05, 0.9 - pos)
        events.append({
            "id": f"t{len(events) + 1:02d}", "phrase": phrase, "terms": terms[:3],
            "category": c["name"],
            "onset": f"{rng.randint(0, duration_min - 4)}m", "rise": f"{rng.randint(1, 5)}m",
            "half_life": f"{rng.randint(2, 8)}m", "peak_per_minute": rng.choice([80, 120, 200, 300]),
            "sentiment": {"pos": round(pos, 2), "neu": round(1 - pos - neg, 2), "neg": round(neg, 2)},
        })
    spam = [
        {"id": "x01", "phrase": "免费领取新手机", "terms": ["福利", "私信", "链接"], "category": "科技",
         "start": "1m", "end": "28m", "bots": 300, "per_minute": 600, "on": "1m", "off": "2m"},
        {"id": "x02", "phrase": "刷单日赚五百", "terms": ["兼职", "返现", "加我"], "category": "财经",
         "start": "4m", "end": "26m", "bots": 200, "per_minute": 500, "on": "2m", "off": "2m"},
    ]
    doc = {"name": "demo-train", "seed": a.seed, "duration": f"{duration_min}m",
           "rate_per_minute": 2500, "events": events, "spam": spam}
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("# Made by tools/demo_model/make_train_scenario.py: the demo model's training scenario.\n")
        yaml.safe_dump(doc, f, allow_unicode=True, sort_keys=False, width=100)


if __name__ == "__main__":
    main()
