#include "stream/lexicon.h"

#include "stream/hash.h"

namespace surge::stream {
namespace {

struct CategoryWords {
  const char* name;
  std::vector<const char*> words;
};

// Common words that name a domain; kept short on purpose (a heuristic for the no-model path).
const std::vector<CategoryWords>& BuiltInCategories() {
  static const std::vector<CategoryWords> kCategories = {
      {"科技", {"科技",   "技术", "手机",   "芯片", "人工智能", "ai",     "算法",   "软件",
                "互联网", "电脑", "机器人", "数据", "模型",     "大模型", "半导体", "卫星",
                "航天",   "火箭", "5g",     "苹果", "华为",     "程序",   "编程",   "处理器"}},
      {"体育",
       {"体育", "比赛", "足球", "篮球", "冠军", "球队", "球员", "联赛", "进球", "奥运", "世界杯",
        "决赛", "教练", "运动员", "金牌", "赛季", "nba", "网球", "球迷"}},
      {"娱乐",
       {"娱乐", "明星", "电影", "电视剧", "综艺", "演员", "歌手", "演唱会", "票房", "导演", "粉丝",
        "偶像", "专辑", "剧组", "热播"}},
      {"财经",
       {"财经", "股市", "股票", "基金", "银行", "经济", "投资", "利率", "央行", "房价", "理财",
        "汇率", "a股", "上市", "财报", "通胀", "债券", "涨停", "楼市"}},
      {"社会",
       {"社会", "警方", "民警", "事故", "小区", "居民", "地铁", "交通", "暴雨", "救援", "市民",
        "社区", "城市"}},
      {"国际",
       {"国际", "外交", "总统", "峰会", "联合国", "外长", "制裁", "选举", "首相", "大使", "谈判",
        "北约", "关税", "贸易"}},
      {"健康",
       {"健康", "医院", "医生", "疫苗", "流感", "发烧", "病毒", "感冒", "体检", "患者", "药物",
        "养生", "睡眠", "减肥"}},
      {"汽车",
       {"汽车", "新能源", "电动车", "续航", "充电", "车主", "车型", "自动驾驶", "电池", "召回",
        "油耗", "车展", "驾驶"}},
      {"游戏", {"游戏", "玩家", "手游", "电竞", "版本", "服务器", "排位", "战队", "主播", "氪金"}},
      {"美食",
       {"美食", "餐厅", "火锅", "奶茶", "外卖", "小吃", "甜品", "烧烤", "咖啡", "厨师", "菜谱",
        "零食"}},
      {"教育",
       {"教育", "学校", "老师", "学生", "高考", "考研", "大学", "考试", "课程", "毕业", "招生",
        "留学"}},
      {"旅游", {"旅游", "景区", "机票", "酒店", "游客", "攻略", "旅行", "假期", "签证", "打卡"}},
  };
  return kCategories;
}

const std::vector<const char*> kPositive = {"开心", "喜欢", "支持", "点赞",   "厉害", "期待",
                                            "满意", "感动", "好评", "给力",   "惊喜", "激动",
                                            "骄傲", "漂亮", "完美", "太棒了", "精彩", "优秀",
                                            "幸福", "感谢", "加油", "牛",     "赞"};
const std::vector<const char*> kNegative = {
    "失望", "生气", "难过", "无语", "吐槽", "糟糕", "差劲", "担心", "愤怒", "崩溃", "心疼",
    "离谱", "后悔", "郁闷", "可惜", "垃圾", "讨厌", "恶心", "害怕", "痛苦", "坑",   "骗子"};

}  // namespace

const Lexicon& Lexicon::BuiltIn() {
  static const Lexicon* kLexicon = [] {
    auto* l = new Lexicon();
    const auto& cats = BuiltInCategories();
    for (size_t i = 0; i < cats.size(); ++i) {
      l->categories_.emplace_back(cats[i].name);
      for (const char* w : cats[i].words) l->category_.emplace(HashBytes(w), static_cast<int>(i));
    }
    for (const char* w : kPositive) l->polarity_.emplace(HashBytes(w), 1);
    for (const char* w : kNegative) l->polarity_.emplace(HashBytes(w), -1);
    return l;
  }();
  return *kLexicon;
}

}  // namespace surge::stream
