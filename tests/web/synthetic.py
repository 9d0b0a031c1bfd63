#!/usr/bin/env python3
"""Writes a synthetic trends JSONL (the `surge trends` format) and a posts JSONL with the sample
posts it names, for trying `surge dashboard` and for the dashboard's browser test.

Topics rise and fall over the buckets, so ranks move, topics enter and leave the list.

    python3 tests/web/synthetic.py --out DIR [--buckets 30] [--top 10] [--seed 7]
"""
import argparse
import json
import math
import os
import random

# (topic_id, hashtag, terms, category, base sentiment pos/neg)
TOPICS = [
    ("t1", "#AI推理革命#", ["AI", "推理", "革命"], "科技", (0.62, 0.08)),
    ("t2", "#神舟二十三号发射成功#", ["神舟", "发射", "成功"], "科技", (0.80, 0.03)),
    ("t3", "#高考志愿填报#", ["高考", "志愿", "填报"], "教育", (0.35, 0.25)),
    ("t4", "#台风海葵登陆#", ["台风", "海葵", "登陆"], "社会", (0.10, 0.55)),
    ("t5", "#国足世预赛#", ["国足", "世预赛"], "体育", (0.30, 0.45)),
    ("t6", "#新能源车降价#", ["新能源车", "降价"], "财经", (0.45, 0.20)),
    ("t7", "#周杰伦演唱会#", ["周杰伦", "演唱会"], "娱乐", (0.75, 0.05)),
    ("t8", "#城市马拉松#", ["马拉松", "城市"], "体育", (0.66, 0.06)),
    ("t9", "#暴雨预警#", ["暴雨", "预警"], "社会", (0.08, 0.50)),
    ("t10", "#大模型开源#", ["大模型", "开源"], "科技", (0.58, 0.10)),
    ("t11", "#中秋月饼#", ["中秋", "月饼"], "生活", (0.70, 0.07)),
    ("t12", "#芯片出口管制#", ["芯片", "出口", "管制"], "财经", (0.20, 0.40)),
    ("t13", "#博物馆夜游#", ["博物馆", "夜游"], "文化", (0.72, 0.04)),
    ("t14", "#地铁新线开通#", ["地铁", "新线", "开通"], "社会", (0.60, 0.08)),
]

SENTENCES = [
    "刚看到{t}的消息，太震撼了！",
    "关于{t}，大家怎么看？评论区聊聊。",
    "{t}终于来了，等了好久。",
    "朋友圈都在刷{t}，我也来凑个热闹。",
    "{t}这件事值得持续关注，细节还在更新。",
    "说实话{t}让我有点担心……",
]


def heat_curve(i, b, rng):
    """Heat of topic i at bucket b: a base level plus one burst at a topic-specific time."""
    peak = (i * 7) % 40
    width = 4 + (i % 5)
    base = 800 + 150 * (i % 4)
    burst = 9000 * math.exp(-((b - peak) ** 2) / (2.0 * width * width))
    return base + burst * (0.6 + 0.1 * (i % 5)) + rng.uniform(0, 200)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for trends.jsonl and posts.jsonl")
    ap.add_argument("--buckets", type=int, default=30)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--bucket-ms", type=int, default=60000)
    ap.add_argument("--start-ms", type=int, default=1764669600000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    posts_total = {t[0]: 0 for t in TOPICS}
    first_seen = {}
    prev_ranks = {}
    post_no = 0
    with open(os.path.join(args.out, "trends.jsonl"), "w", encoding="utf-8") as tf, \
            open(os.path.join(args.out, "posts.jsonl"), "w", encoding="utf-8") as pf:
        for b in range(args.buckets):
            end = args.start_ms + (b + 1) * args.bucket_ms
            heats = [(heat_curve(i, b, rng), i) for i in range(len(TOPICS))]
            heats.sort(reverse=True)
            ranks = {}
            for rank, (heat, i) in enumerate(heats[: args.top], start=1):
                tid, tag, terms, cat, (pos, neg) = TOPICS[i]
                ranks[tid] = rank
                first_seen.setdefault(tid, end - args.bucket_ms)
                n = int(heat / 10)
                posts_total[tid] += n
                samples = []
                for _ in range(2):
                    post_no += 1
                    pid = "p%d" % post_no
                    samples.append(pid)
                    text = rng.choice(SENTENCES).format(t=tag)
                    post = {"id": pid, "ts": end - rng.randint(1000, args.bucket_ms - 1),
                            "user": {"id": "u%d" % rng.randint(1, 5000), "followers": 100},
                            "text": text}
                    pf.write(json.dumps(post, ensure_ascii=False) + "\n")
                p = max(0.0, min(1.0, pos + rng.uniform(-0.05, 0.05)))
                ng = max(0.0, min(1.0 - p, neg + rng.uniform(-0.05, 0.05)))
                update = {
                    "topic_id": tid, "hashtag": tag, "rank": rank, "prev_rank": prev_ranks.get(tid),
                    "heat": round(heat, 2), "terms": terms, "category": cat,
                    "sentiment": {"pos": round(p, 3), "neu": round(1 - p - ng, 3), "neg": round(ng, 3)},
                    "posts": posts_total[tid], "authors": int(posts_total[tid] * 0.8),
                    "first_seen": first_seen[tid], "updated": end, "samples": samples,
                }
                tf.write(json.dumps(update, ensure_ascii=False) + "\n")
            prev_ranks = ranks


if __name__ == "__main__":
    main()
