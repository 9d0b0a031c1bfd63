// The built-in default scenario: 30 simulated minutes of a Weibo-like evening (20:00-20:30
// Beijing time), about 370k posts, 13 events of very different sizes, 3 spam campaigns, evergreen
// chatter and daily-cycle bumps. `surge simulate --print-scenario` prints it as a starting point
// for new scenario files.
#include "stream/sim/scenario.h"

namespace surge::stream::sim {
namespace {

constexpr std::string_view kDefaultScenario = R"yaml(# Surge default scenario.
name: default
seed: 42
start: "2026-12-02T20:00:00+08:00"
duration: 30m
bucket: 1m
rate_per_minute: 10000
noise: 0.06
repost_share: 0.2
end_fraction: 0.05
# Activity at the start of each local hour (0h..23h), 1 = rate_per_minute.
diurnal: [0.62, 0.42, 0.28, 0.19, 0.14, 0.13, 0.18, 0.33, 0.52, 0.68, 0.77, 0.83,
          0.93, 0.88, 0.80, 0.80, 0.82, 0.84, 0.86, 0.90, 0.96, 1.00, 0.99, 0.85]

users:
  count: 200000
  followers: {median: 150, sigma: 1.9, max: 100000000, verified_factor: 40}
  verified_share: 0.02
  age: {median_days: 1400, sigma: 0.7, min_days: 30}
  activity_sigma: 1.2

categories:
  - name: 科技
    weight: 0.12
    sentiment: {pos: 0.35, neu: 0.5, neg: 0.15}
    seed_words: [手机, 芯片, 人工智能, 算法, 数据, 互联网, 软件, 屏幕, 电池, 系统, 程序员, 机器人,
                 网络, 电脑, 科技, 卫星, 技术, 智能, 服务器, 处理器, 操作系统, 数码, 相机, 耳机,
                 平板, 云计算, 空间站, 航天]
    dict_chars: 电网数芯屏码
  - name: 娱乐
    weight: 0.16
    sentiment: {pos: 0.4, neu: 0.35, neg: 0.25}
    seed_words: [明星, 电影, 电视剧, 演员, 导演, 综艺, 歌手, 演唱会, 粉丝, 票房, 剧情, 角色, 音乐,
                 专辑, 偶像, 娱乐圈, 主演, 舞台, 颁奖, 红毯, 新歌, 片场, 预告片, 经纪人, 工作室]
    dict_chars: 影剧歌演
  - name: 体育
    weight: 0.1
    sentiment: {pos: 0.4, neu: 0.4, neg: 0.2}
    seed_words: [足球, 篮球, 比赛, 球队, 冠军, 球员, 教练, 联赛, 进球, 奥运, 体育, 运动员, 赛季,
                 决赛, 球迷, 射门, 裁判, 网球, 排球, 马拉松, 主场, 客场, 比分, 金牌]
    dict_chars: 球赛
  - name: 财经
    weight: 0.08
    sentiment: {pos: 0.25, neu: 0.55, neg: 0.2}
    seed_words: [股市, 股票, 基金, 银行, 利率, 投资, 经济, 房价, 理财, 市场, 上市, 公司, 财报, 汇率,
                 债券, 指数, 散户, 通胀, 消费, 贷款, 楼市, 央行, 涨停]
    dict_chars: 股融债
  - name: 社会
    weight: 0.14
    sentiment: {pos: 0.2, neu: 0.5, neg: 0.3}
    seed_words: [警方, 小区, 居民, 学校, 交通, 地铁, 派出所, 社区, 民警, 事故, 城市, 村民, 志愿者,
                 市民, 政府, 街道, 物业, 垃圾分类, 停车, 快递, 救援, 暴雨, 停课, 出行, 停运, 通勤]
    dict_chars: 警村
  - name: 国际
    weight: 0.07
    sentiment: {pos: 0.15, neu: 0.6, neg: 0.25}
    seed_words: [总统, 外交, 联合国, 峰会, 美国, 欧洲, 日本, 俄罗斯, 大使, 制裁, 选举, 谈判, 外长,
                 国际, 首相, 议会, 和平, 协议, 边境, 难民, 北约, 关税, 使馆, 合作, 贸易]
    dict_chars: 盟邦
  - name: 健康
    weight: 0.08
    sentiment: {pos: 0.3, neu: 0.45, neg: 0.25}
    seed_words: [医生, 医院, 健康, 疫苗, 感冒, 发烧, 睡眠, 减肥, 饮食, 营养, 血压, 体检, 药物, 病毒,
                 症状, 中医, 养生, 锻炼, 失眠, 维生素, 门诊, 手术, 患者, 流感]
    dict_chars: 医药病疗
  - name: 汽车
    weight: 0.07
    sentiment: {pos: 0.35, neu: 0.45, neg: 0.2}
    seed_words: [汽车, 新能源, 电动车, 油耗, 续航, 充电桩, 车型, 发动机, 变速箱, 驾驶, 试驾, 车主,
                 销量, 轮胎, 底盘, 车展, 品牌, 自动驾驶, 高速, 加油, 车库, 保养]
    dict_chars: 车
  - name: 游戏
    weight: 0.08
    sentiment: {pos: 0.4, neu: 0.35, neg: 0.25}
    seed_words: [游戏, 玩家, 手游, 电竞, 主播, 版本, 副本, 装备, 英雄, 皮肤, 排位, 战队, 攻略, 充值,
                 关卡, 开黑, 上分, 直播, 赛事, 通关, 抽卡, 排队]
    dict_chars: 玩
  - name: 美食
    weight: 0.1
    sentiment: {pos: 0.55, neu: 0.3, neg: 0.15}
    seed_words: [美食, 火锅, 餐厅, 甜品, 奶茶, 烧烤, 面条, 饺子, 蛋糕, 咖啡, 厨师, 菜谱, 口味, 外卖,
                 小吃, 水果, 早餐, 海鲜, 米饭, 红烧肉, 麻辣, 烘焙, 零食, 食堂, 价格]
    dict_chars: 菜汤饭味

evergreen:
  share: 0.45
  zipf: 1.0
  words: [生活, 工作, 朋友, 周末, 心情, 孩子, 天气, 回家, 加班, 学习, 吃饭, 睡觉, 老板, 同事, 爸妈,
          晚上]

# Daily-cycle bumps: ordinary words that rise and fall with the time of day. Not events.
bumps:
  - {words: [夜宵, 烤串], peak: "21:00", width: 25m, amplitude: 0.8, share: 0.012}
  - {words: [追剧], peak: "20:15", width: 6m, amplitude: 1.0, share: 0.008}
  - {words: [跑步, 健身], peak: "20:05", width: 20m, amplitude: 0.5, share: 0.01}

lexicon:
  pos: [太棒了, 开心, 喜欢, 支持, 点赞, 厉害, 期待, 满意, 感动, 好评, 给力, 惊喜, 激动, 骄傲, 漂亮,
        完美]
  neg: [失望, 生气, 难过, 无语, 吐槽, 糟糕, 差劲, 担心, 愤怒, 崩溃, 心疼, 离谱, 后悔, 郁闷, 可惜,
        垃圾]
  neu: [据说, 消息称, 有人说, 目前, 据了解, 官方表示, 数据显示, 关注一下, 持续关注, 据报道]
  adjectives: [普通, 具体, 主要, 正常, 直接, 简单, 复杂, 一般, 特殊, 明显, 频繁, 稳定, 详细, 传统,
               长期, 临时, 公开, 实际]
  emoji: ["[doge]", "[吃瓜]", "[允悲]", "[二哈]", "[思考]", "[费解]", "[围观]"]
  exclude: [讨厌, 痛苦, 死亡, 伤心, 高兴, 快乐, 悲伤, 美好, 好看, 难看, 痛恨, 可怕, 害怕, 恐怖, 灾难,
            反对, 赞成, 欢迎, 成功, 失败, 优秀, 幸福, 热爱, 喜爱, 愉快, 痛快, 遗憾, 悲痛, 愤慨, 不满,
            满足, 称赞, 赞扬, 批评, 抱怨, 欣赏, 感谢, 希望, 爱好, 爱情, 可爱, 热情, 烦恼, 哭泣]

templates:
  background:
    - "{noun}{verb}{general}，{adv}{adj}。{sentiment}"
    - "刚刚{verb}了{noun}，{sentiment}"
    - "{noun}和{noun}{adv}{adj}，{sentiment}{emoji}"
    - "关于{noun}的{general}，{adv}{verb}"
    - "今天的{noun}{adv}{adj}，{sentiment}"
    - "{noun}{noun}{verb}了{general}"
    - "有没有人{verb}过{noun}？{sentiment}"
    - "{general}{verb}{noun}，{noun}{adv}{verb}"
    - "分享一下{noun}：{noun}{verb}{general}。{sentiment}"
    - "{user} {noun}{verb}了吗？{sentiment}"
    - "听说{noun}{adv}{verb}，{general}{adj}"
    - "{noun}{adv}{adj}，{noun}{verb}{general}{emoji}"
    - "最近{verb}{noun}，{adv}{adj}，{sentiment}"
    - "{noun}的{general}{verb}了{num}次，{sentiment}"
  event:
    - "{phrase}，{term}{verb}{noun}。{sentiment}"
    - "刚看到{phrase}的消息，{noun}{adv}{verb}了。{sentiment}"
    - "{term}和{term}都{verb}了，{phrase}{adv}{adj}"
    - "关于{phrase}：{term}{verb}{general}，{sentiment}"
    - "{phrase}{emoji}{term}{adv}{verb}，{noun}也{verb}了"
    - "大家怎么看{phrase}？{term}{verb}{noun}，{sentiment}"
    - "{noun}圈炸了，{phrase}！{term}{adv}{adj}，{sentiment}"
    - "没想到{phrase}，{term}{verb}{noun}，{sentiment}"
    - "{term}{verb}{term}，{phrase}。{sentiment}"
    - "{user} {phrase}了解一下，{term}{adv}{verb}"
  spam:
    - "{phrase}！{term}{term}，{rand}"
    - "【{phrase}】{term}戳{user} {emoji}{rand}"
    - "{phrase}，手慢无！{term}{num}{rand}"
  repost: ["转发微博", "{sentiment}", "{sentiment}{emoji}", "mark", "来了", "{emoji}",
           "我也{verb}了", "{adv}{adj}"]
  evergreen: ["，{evergreen}{adv}{verb}", "。{evergreen}{adv}{adj}", "，{evergreen}也{verb}了"]
  bump: ["，来点{bump}", "。{bump}走起", "，{bump}时间到"]

events:
  - {id: e01, phrase: AI推理革命, terms: [芯片, 发布会, 处理器], category: 科技, onset: 3m, rise: 6m,
     half_life: 6m, peak_per_minute: 600, shape: gamma, shape_param: 2,
     sentiment: {pos: 0.6, neu: 0.3, neg: 0.1}}
  - {id: e02, phrase: 国足逆转绝杀, terms: [比赛, 进球, 球迷], category: 体育, onset: 5m, rise: 3m,
     half_life: 5m, peak_per_minute: 900, shape: gamma, shape_param: 3,
     sentiment: {pos: 0.75, neu: 0.15, neg: 0.1}}
  - {id: e03, phrase: 央行意外降准, terms: [银行, 利率, 股市], category: 财经, onset: 7m, rise: 5m,
     half_life: 8m, peak_per_minute: 350, shape: lognormal, shape_param: 0.6,
     sentiment: {pos: 0.4, neu: 0.5, neg: 0.1}}
  - {id: e04, phrase: 顶流官宣恋情, terms: [明星, 粉丝, 工作室], category: 娱乐, onset: 9m, rise: 2m,
     half_life: 4m, peak_per_minute: 1200, shape: gamma, shape_param: 2,
     sentiment: {pos: 0.45, neu: 0.2, neg: 0.35}, repost_share: 0.5}
  - {id: e05, phrase: 暴雨红色预警, terms: [暴雨, 停课, 出行], category: 社会, onset: 4m, rise: 8m,
     half_life: 10m, peak_per_minute: 250, shape: lognormal, shape_param: 0.5,
     sentiment: {pos: 0.05, neu: 0.55, neg: 0.4}}
  - {id: e06, phrase: 峰会联合声明, terms: [外长, 合作, 贸易], category: 国际, onset: 11m, rise: 4m,
     half_life: 6m, peak_per_minute: 200, sentiment: {pos: 0.3, neu: 0.6, neg: 0.1}}
  - {id: e07, phrase: 甲流高发季, terms: [流感, 发烧, 疫苗], category: 健康, onset: 13m, rise: 5m,
     half_life: 8m, peak_per_minute: 150, sentiment: {pos: 0.05, neu: 0.45, neg: 0.5}}
  - {id: e08, phrase: 新游首日崩服, terms: [服务器, 玩家, 排队], category: 游戏, onset: 15m, rise: 2m,
     half_life: 3m, peak_per_minute: 500, shape: gamma, shape_param: 3,
     sentiment: {pos: 0.1, neu: 0.2, neg: 0.7}}
  - {id: e09, phrase: 螺蛳粉涨价, terms: [价格, 外卖, 小吃], category: 美食, onset: 17m, rise: 4m,
     half_life: 5m, peak_per_minute: 120, sentiment: {pos: 0.15, neu: 0.4, neg: 0.45}}
  - {id: e10, phrase: 地铁信号故障, terms: [地铁, 停运, 通勤], category: 社会, onset: 19m, rise: 90s,
     half_life: 3m, peak_per_minute: 80, sentiment: {pos: 0.05, neu: 0.35, neg: 0.6}}
  - {id: e11, phrase: 电池召回事件, terms: [电动车, 车主, 续航], category: 汽车, onset: 20m, rise: 3m,
     half_life: 6m, peak_per_minute: 60, sentiment: {pos: 0.1, neu: 0.5, neg: 0.4}}
  - {id: e12, phrase: 航天员出舱, terms: [空间站, 航天, 直播], category: 科技, onset: 22m, rise: 3m,
     half_life: 6m, peak_per_minute: 180, sentiment: {pos: 0.8, neu: 0.15, neg: 0.05}}
  - {id: e13, phrase: 演唱会门票秒空, terms: [歌手, 黄牛, 粉丝], category: 娱乐, onset: 24m, rise: 2m,
     half_life: 4m, peak_per_minute: 40, sentiment: {pos: 0.3, neu: 0.3, neg: 0.4}}

# Bot rings: near-identical posts from young, low-follower, unverified accounts, in bursts.
spam:
  - {id: s01, phrase: 奶茶0元领取, terms: [优惠券, 私信, 链接], category: 美食, start: 2m, end: 28m,
     bots: 400, per_minute: 1500, on: 1m, off: 2m}
  - {id: s02, phrase: 为哥哥打榜冲冲冲, terms: [应援, 投票, 偶像], category: 娱乐, start: 6m,
     end: 26m, bots: 600, per_minute: 2000, on: 2m, off: 3m}
  - {id: s03, phrase: 内部消息牛股推荐, terms: [涨停, 老师, 免费], category: 财经, start: 10m,
     end: 30m, bots: 250, per_minute: 900, on: 1m, off: 1m}
)yaml";

}  // namespace

std::string_view DefaultScenarioYaml() { return kDefaultScenario; }

}  // namespace surge::stream::sim
