// A small deterministic post stream for the stream tests: background chatter from a fixed list of
// common dictionary words, plus bursts (an event phrase with key terms, posted by many distinct
// ordinary accounts) and spam campaigns (near-identical posts from a small ring of young,
// low-follower accounts).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "stream/post.h"

namespace surge::stream::testing {

struct Burst {
  std::string phrase;
  std::vector<std::string> terms;
  int start_bucket = 5;
  int peak_per_bucket = 150;  // posts in the peak bucket
  int rise_buckets = 2;
  int decay_buckets = 4;
  bool spam = false;  // a bot ring instead of organic posting
  int bots = 30;
};

struct StreamSpec {
  int64_t start_ms = 1764676800000;  // a bucket boundary
  int64_t bucket_ms = 60000;
  int buckets = 16;
  int background_per_bucket = 1500;
  uint64_t seed = 1;
  std::vector<Burst> bursts;
};

namespace internal {

inline const std::vector<std::string>& Words() {
  static const std::vector<std::string> kWords = {
      "生活",   "工作",   "朋友",   "周末", "心情", "孩子", "天气", "回家", "学习", "吃饭", "睡觉",
      "电影",   "音乐",   "旅行",   "城市", "公司", "学校", "老师", "同事", "晚上", "早上", "中午",
      "地铁",   "公交",   "咖啡",   "早餐", "晚饭", "电脑", "手机", "照片", "视频", "新闻", "小说",
      "运动",   "跑步",   "游泳",   "篮球", "足球", "比赛", "商场", "超市", "医院", "公园", "小区",
      "房子",   "汽车",   "快递",   "外卖", "衣服", "鞋子", "花园", "阳光", "下雨", "刮风", "冬天",
      "夏天",   "春天",   "秋天",   "假期", "考试", "作业", "会议", "项目", "老板", "客户", "市场",
      "价格",   "质量",   "服务",   "经验", "方法", "问题", "答案", "意见", "建议", "计划", "目标",
      "机会",   "时间",   "地方",   "历史", "文化", "艺术", "科学", "技术", "网络", "软件", "数据",
      "图书馆", "博物馆", "动物园", "游戏", "节目", "歌曲", "演员", "导演", "作者", "读者", "记者",
      "厨师",   "司机",   "医生",   "护士", "律师", "警察", "农民", "工人", "学生", "邻居", "家人",
      "父母",   "爷爷",   "奶奶",   "宠物", "小猫", "小狗", "水果", "蔬菜", "面包", "牛奶", "米饭",
      "面条",   "饺子",   "火车",   "飞机", "机场", "车站", "酒店", "餐厅", "银行", "邮局", "电话",
      "短信",   "邮件",   "消息",   "故事", "梦想", "习惯", "健康", "身体", "精神", "感觉"};
  return kWords;
}

inline const std::vector<std::string>& Glue() {
  static const std::vector<std::string> kGlue = {"，", "。", "的", "和", "在", "了", "！", "？"};
  return kGlue;
}

}  // namespace internal

inline int BurstPosts(const Burst& b, int bucket) {
  int k = bucket - b.start_bucket;
  if (k < 0) return 0;
  if (k < b.rise_buckets) return b.peak_per_bucket * (k + 1) / (b.rise_buckets + 1);
  if (k == b.rise_buckets) return b.peak_per_bucket;
  int d = k - b.rise_buckets;
  if (d > b.decay_buckets) return 0;
  return b.peak_per_bucket >> d;
}

inline std::vector<Post> MakeStream(const StreamSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  const auto& words = internal::Words();
  const auto& glue = internal::Glue();
  auto word = [&] { return words[rng() % words.size()]; };
  std::vector<Post> posts;
  int64_t next_user = 100000;
  for (int bucket = 0; bucket < spec.buckets; ++bucket) {
    const int64_t t0 = spec.start_ms + bucket * spec.bucket_ms;
    struct Item {
      int64_t ts;
      Post post;
    };
    std::vector<Item> items;
    for (int i = 0; i < spec.background_per_bucket; ++i) {
      Post p;
      p.ts_ms = t0 + static_cast<int64_t>(rng() % spec.bucket_ms);
      p.user.id = "u" + std::to_string(rng() % 20000);
      p.user.followers = 20 + static_cast<int64_t>(rng() % 2000);
      p.user.created_ms = spec.start_ms - 400LL * 86400000;
      int n = 4 + static_cast<int>(rng() % 5);
      for (int k = 0; k < n; ++k) {
        p.text += word();
        if (rng() % 3 == 0) p.text += glue[rng() % glue.size()];
      }
      p.likes = static_cast<int64_t>(rng() % 5);
      items.push_back({p.ts_ms, std::move(p)});
    }
    for (const Burst& b : spec.bursts) {
      int n = BurstPosts(b, bucket);
      for (int i = 0; i < n; ++i) {
        Post p;
        p.ts_ms = t0 + static_cast<int64_t>(rng() % spec.bucket_ms);
        if (b.spam) {
          p.user.id = "bot" + std::to_string(rng() % b.bots) + b.phrase;
          p.user.followers = static_cast<int64_t>(rng() % 20);
          p.user.created_ms = p.ts_ms - static_cast<int64_t>(1 + rng() % 10) * 86400000;
          p.text = b.phrase + "！" + b.terms[rng() % b.terms.size()] + "戳我" +
                   std::to_string(rng() % 100);
        } else {
          p.user.id = "f" + std::to_string(next_user++);
          p.user.followers = 50 + static_cast<int64_t>(rng() % 5000);
          p.user.created_ms = spec.start_ms - 800LL * 86400000;
          switch (rng() % 4) {
            case 0:
              p.text = b.phrase + "，" + b.terms[rng() % b.terms.size()] + word() + word();
              break;
            case 1:
              p.text = "刚看到" + b.phrase + "的消息，" + word() + b.terms[rng() % b.terms.size()];
              break;
            case 2:
              p.text = "#" + b.phrase + "# " + word() + "和" + b.terms[rng() % b.terms.size()] +
                       "都" + word();
              break;
            default:
              p.text = word() + b.terms[rng() % b.terms.size()] + "，" + b.phrase + "！" + word();
          }
          p.comments = static_cast<int64_t>(rng() % 20);
          p.reposts = static_cast<int64_t>(rng() % 10);
        }
        items.push_back({p.ts_ms, std::move(p)});
      }
    }
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.ts < b.ts; });
    for (auto& it : items) {
      it.post.id = "p" + std::to_string(posts.size());
      posts.push_back(std::move(it.post));
    }
  }
  return posts;
}

inline std::string ToJsonl(const std::vector<Post>& posts) {
  std::string out;
  for (const Post& p : posts) {
    AppendPostJson(p, &out);
    out.push_back('\n');
  }
  return out;
}

}  // namespace surge::stream::testing
