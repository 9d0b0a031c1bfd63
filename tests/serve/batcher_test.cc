#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "serve/scheduler.h"

namespace surge::serve {
namespace {

using namespace std::chrono_literals;

Tensor Ids(int64_t batch, int64_t seq, int64_t value) {
  Tensor t(DType::kInt64, {batch, seq});
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<int64_t>()[i] = value;
  return t;
}

// An executor that records batch shapes and returns per-row sums ([B]) and the ids ([B, S]).
struct Recorder {
  std::mutex mu;
  std::vector<Shape> shapes;
  std::chrono::milliseconds delay{0};
  std::promise<void>* gate = nullptr;
  std::shared_future<void> gate_future;

  Executor Make() {
    return [this](int, const engine::TensorMap& in) -> Result<engine::TensorMap> {
      if (gate_future.valid()) gate_future.wait();
      if (delay.count()) std::this_thread::sleep_for(delay);
      const Tensor& ids = in.at("input_ids");
      {
        std::lock_guard<std::mutex> lk(mu);
        shapes.push_back(ids.shape());
      }
      Tensor sums(DType::kFloat32, {ids.dim(0)});
      for (int64_t r = 0; r < ids.dim(0); ++r) {
        float s = 0;
        for (int64_t c = 0; c < ids.dim(1); ++c) s += ids.data_as<int64_t>()[r * ids.dim(1) + c];
        sums.data_as<float>()[r] = s;
      }
      engine::TensorMap out;
      out.emplace("sum", sums);
      out.emplace("tokens", ids.Clone());
      return out;
    };
  }
};

struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<Status> statuses;
  std::vector<engine::TensorMap> outputs;
  WorkCallback Callback() {
    return [this](Result<engine::TensorMap> r, const WorkTiming&) {
      std::lock_guard<std::mutex> lk(mu);
      statuses.push_back(r.ok() ? Status::Ok() : r.status());
      if (r.ok()) outputs.push_back(std::move(r).value());
      ++done;
      cv.notify_all();
    };
  }
  bool WaitFor(int n, std::chrono::milliseconds timeout = 5000ms) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, timeout, [&] { return done >= n; });
  }
};

Work MakeWork(int64_t seq, int64_t value, WorkCallback cb, int64_t priority = 0) {
  Work w;
  w.inputs.emplace("input_ids", Ids(1, seq, value));
  w.done = std::move(cb);
  w.priority = priority;
  return w;
}

TEST(DynamicBatcher, DelayCollectsRequestsIntoOneBatch) {
  Recorder rec;
  BatcherOptions o;
  o.max_batch_size = 8;
  o.max_queue_delay_us = 200000;  // long enough for all 8 to arrive
  DynamicBatcher b(o, rec.Make());
  Waiter w;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(b.Enqueue(MakeWork(4, i, w.Callback())).ok());
  ASSERT_TRUE(w.WaitFor(8));
  ASSERT_EQ(rec.shapes.size(), 1u);  // full batch sent at once, before the delay
  EXPECT_EQ(rec.shapes[0], (Shape{8, 4}));
  for (const auto& s : w.statuses) EXPECT_TRUE(s.ok());
  // Each request gets its own row back.
  std::set<float> sums;
  for (const auto& out : w.outputs) {
    EXPECT_EQ(out.at("sum").shape(), (Shape{1}));
    sums.insert(out.at("sum").data_as<float>()[0]);
  }
  EXPECT_EQ(sums.size(), 8u);
}

TEST(DynamicBatcher, PreferredSizeGoesWithoutWaiting) {
  Recorder rec;
  std::promise<void> gate;
  rec.gate_future = gate.get_future().share();
  BatcherOptions o;
  o.max_batch_size = 16;
  o.preferred_batch_sizes = {4};
  o.max_queue_delay_us = 10'000'000;
  DynamicBatcher b(o, rec.Make());
  Waiter w;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(b.Enqueue(MakeWork(4, i, w.Callback())).ok());
  gate.set_value();
  ASSERT_TRUE(w.WaitFor(4, 3000ms));  // far less than the 10 s delay
  ASSERT_FALSE(rec.shapes.empty());
  EXPECT_EQ(rec.shapes[0][0], 4);
}

TEST(DynamicBatcher, QueueLimitHoldsAndRejectsAtOnce) {
  Recorder rec;
  std::promise<void> gate;
  rec.gate_future = gate.get_future().share();
  BatcherOptions o;
  o.max_batch_size = 1;
  o.default_policy.max_queue_size = 2;
  DynamicBatcher b(o, rec.Make());
  Waiter w;
  // One executing (blocked on the gate), two queued, the next rejected.
  ASSERT_TRUE(b.Enqueue(MakeWork(4, 1, w.Callback())).ok());
  for (int i = 0; i < 100 && b.inflight() == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(b.Enqueue(MakeWork(4, 2, w.Callback())).ok());
  ASSERT_TRUE(b.Enqueue(MakeWork(4, 3, w.Callback())).ok());
  Status s = b.Enqueue(MakeWork(4, 4, w.Callback()));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("queue"), std::string::npos);
  EXPECT_EQ(b.pending(), 2u);
  gate.set_value();
  ASSERT_TRUE(w.WaitFor(3));
  EXPECT_EQ(w.done, 3);
}

TEST(DynamicBatcher, TimeoutRejectsQueuedRequest) {
  Recorder rec;
  std::promise<void> gate;
  rec.gate_future = gate.get_future().share();
  BatcherOptions o;
  o.max_batch_size = 1;
  DynamicBatcher b(o, rec.Make());
  Waiter w;
  ASSERT_TRUE(b.Enqueue(MakeWork(4, 1, w.Callback())).ok());  // occupies the instance
  for (int i = 0; i < 100 && b.inflight() == 0; ++i) std::this_thread::sleep_for(5ms);
  Work timed = MakeWork(4, 2, w.Callback());
  timed.timeout_us = 20000;
  ASSERT_TRUE(b.Enqueue(std::move(timed)).ok());
  // The timeout fires while the instance is still busy (Triton #7512 waits for the execution).
  ASSERT_TRUE(w.WaitFor(1, 2000ms));
  EXPECT_EQ(w.statuses[0].code(), StatusCode::kDeadlineExceeded);
  gate.set_value();
  ASSERT_TRUE(w.WaitFor(2));
}

TEST(DynamicBatcher, HigherPriorityRunsFirst) {
  Recorder rec;
  std::promise<void> gate;
  rec.gate_future = gate.get_future().share();
  BatcherOptions o;
  o.max_batch_size = 1;
  o.priority_levels = 2;
  o.default_priority_level = 2;
  DynamicBatcher b(o, rec.Make());
  Waiter w;
  ASSERT_TRUE(b.Enqueue(MakeWork(1, 0, w.Callback())).ok());
  for (int i = 0; i < 100 && b.inflight() == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(b.Enqueue(MakeWork(1, 20, w.Callback(), 2)).ok());
  ASSERT_TRUE(b.Enqueue(MakeWork(1, 10, w.Callback(), 1)).ok());
  EXPECT_EQ(b.Enqueue(MakeWork(1, 30, w.Callback(), 3)).code(), StatusCode::kInvalidArgument);
  gate.set_value();
  ASSERT_TRUE(w.WaitFor(3));
  ASSERT_EQ(w.outputs.size(), 3u);
  EXPECT_EQ(w.outputs[1].at("sum").data_as<float>()[0], 10.f);
  EXPECT_EQ(w.outputs[2].at("sum").data_as<float>()[0], 20.f);
}

TEST(DynamicBatcher, CancelledRequestsLeaveTheQueue) {
  Recorder rec;
  std::promise<void> gate;
  rec.gate_future = gate.get_future().share();
  BatcherOptions o;
  o.max_batch_size = 1;
  DynamicBatcher b(o, rec.Make());
  Waiter w;
  ASSERT_TRUE(b.Enqueue(MakeWork(1, 0, w.Callback())).ok());
  for (int i = 0; i < 100 && b.inflight() == 0; ++i) std::this_thread::sleep_for(5ms);
  Work c = MakeWork(1, 5, w.Callback());
  c.cancelled = std::make_shared<std::atomic<bool>>(false);
  CancelFlag flag = c.cancelled;
  ASSERT_TRUE(b.Enqueue(std::move(c)).ok());
  flag->store(true);
  b.Poke();
  ASSERT_TRUE(w.WaitFor(1, 2000ms));
  EXPECT_EQ(w.statuses[0].code(), StatusCode::kCancelled);
  EXPECT_EQ(b.pending(), 0u);
  gate.set_value();
  ASSERT_TRUE(w.WaitFor(2));
  EXPECT_EQ(rec.shapes.size(), 1u);  // the cancelled one never ran
}

TEST(DynamicBatcher, LengthAwareBatchingPadsOnlyToTheLongestAndCutsBack) {
  Recorder rec;
  std::promise<void> gate;
  rec.gate_future = gate.get_future().share();
  BatcherOptions o;
  o.max_batch_size = 8;
  o.max_queue_delay_us = 0;
  o.ragged_inputs = {"input_ids"};
  o.ragged_outputs = {"tokens"};
  o.max_padding_fraction = 0.25;
  DynamicBatcher b(o, rec.Make());
  Waiter w;
  ASSERT_TRUE(b.Enqueue(MakeWork(2, 0, w.Callback())).ok());  // goes alone, holds the instance
  for (int i = 0; i < 100 && b.inflight() == 0; ++i) std::this_thread::sleep_for(5ms);
  for (int64_t seq : {6, 64, 8, 60, 7}) ASSERT_TRUE(b.Enqueue(MakeWork(seq, 1, w.Callback())).ok());
  gate.set_value();
  ASSERT_TRUE(w.WaitFor(6));
  ASSERT_EQ(rec.shapes.size(), 3u);
  EXPECT_EQ(rec.shapes[1], (Shape{3, 8}));   // 6, 8, 7 padded to 8
  EXPECT_EQ(rec.shapes[2], (Shape{2, 64}));  // 64, 60
  for (const auto& out : w.outputs) {
    // Every request's sum equals its own length (ids are 1, padding 0) and tokens are cut back.
    float sum = out.at("sum").data_as<float>()[0];
    EXPECT_EQ(out.at("tokens").dim(1), static_cast<int64_t>(sum == 0 ? 2 : sum));
  }
}

TEST(DynamicBatcher, ShutdownDrainsQueuedWork) {
  Recorder rec;
  rec.delay = 5ms;
  BatcherOptions o;
  o.max_batch_size = 1;
  auto b = std::make_unique<DynamicBatcher>(o, rec.Make());
  Waiter w;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b->Enqueue(MakeWork(2, i, w.Callback())).ok());
  b->Shutdown();
  EXPECT_EQ(w.done, 10);
  for (const auto& s : w.statuses) EXPECT_TRUE(s.ok());
  EXPECT_EQ(b->Enqueue(MakeWork(2, 0, w.Callback())).code(), StatusCode::kFailedPrecondition);
}

TEST(DynamicBatcher, AnsweringABatchDoesNotHoldUpTheNextOne) {
  BatcherOptions o;
  o.max_batch_size = 1;
  std::atomic<int> runs{0};
  std::promise<void> second_ran;
  std::future<void> ran = second_ran.get_future();
  DynamicBatcher b(o, [&](int, const engine::TensorMap&) -> Result<engine::TensorMap> {
    if (++runs == 2) second_ran.set_value();
    engine::TensorMap m;
    m.emplace("sum", Tensor(DType::kFloat32, {1}));
    return m;
  });
  Waiter w;
  bool first_saw_second = false;
  WorkCallback record = w.Callback();
  // The first request's answer waits for the second request to run: the instance must go on to
  // its next batch while a batch is being answered.
  ASSERT_TRUE(b.Enqueue(MakeWork(2, 1, [&](Result<engine::TensorMap> r, const WorkTiming& t) {
                 first_saw_second = ran.wait_for(10s) == std::future_status::ready;
                 record(std::move(r), t);
               })).ok());
  ASSERT_TRUE(b.Enqueue(MakeWork(2, 2, w.Callback())).ok());
  ASSERT_TRUE(w.WaitFor(2, 20s));
  EXPECT_TRUE(first_saw_second);
  for (const auto& s : w.statuses) EXPECT_TRUE(s.ok());
}

TEST(DynamicBatcher, ExecutorErrorFailsTheBatchOnly) {
  BatcherOptions o;
  o.max_batch_size = 4;
  std::atomic<int> calls{0};
  DynamicBatcher b(o, [&](int, const engine::TensorMap&) -> Result<engine::TensorMap> {
    if (calls++ == 0) return InternalError("boom");
    engine::TensorMap m;
    m.emplace("sum", Tensor(DType::kFloat32, {1}));
    return m;
  });
  Waiter w;
  ASSERT_TRUE(b.Enqueue(MakeWork(2, 0, w.Callback())).ok());
  ASSERT_TRUE(w.WaitFor(1));
  ASSERT_TRUE(b.Enqueue(MakeWork(2, 0, w.Callback())).ok());
  ASSERT_TRUE(w.WaitFor(2));
  EXPECT_EQ(w.statuses[0].code(), StatusCode::kInternal);
  EXPECT_TRUE(w.statuses[1].ok());
}

TEST(DynamicBatcher, ABadRequestDoesNotFailItsBatchMates) {
  Recorder rec;
  std::promise<void> gate;
  rec.gate_future = gate.get_future().share();
  Executor inner = rec.Make();
  BatcherOptions o;
  o.max_batch_size = 8;
  DynamicBatcher b(o, [&](int i, const engine::TensorMap& in) -> Result<engine::TensorMap> {
    const Tensor& ids = in.at("input_ids");
    for (int64_t k = 0; k < ids.numel(); ++k) {
      if (ids.data_as<int64_t>()[k] == 666) return InvalidArgumentError("id 666 is out of range");
    }
    return inner(i, in);
  });
  Waiter w;
  ASSERT_TRUE(b.Enqueue(MakeWork(2, 0, w.Callback())).ok());  // holds the instance
  for (int i = 0; i < 100 && b.inflight() == 0; ++i) std::this_thread::sleep_for(5ms);
  for (int64_t v : {1, 666, 2}) ASSERT_TRUE(b.Enqueue(MakeWork(2, v, w.Callback())).ok());
  gate.set_value();
  ASSERT_TRUE(w.WaitFor(4));
  int failed = 0;
  for (const auto& s : w.statuses) failed += !s.ok();
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(w.outputs.size(), 3u);
}

TEST(DynamicBatcher, RejectsBatchLargerThanMax) {
  BatcherOptions o;
  o.max_batch_size = 2;
  DynamicBatcher b(o, [](int, const engine::TensorMap&) -> Result<engine::TensorMap> {
    return engine::TensorMap{};
  });
  Work big;
  big.inputs.emplace("input_ids", Ids(3, 2, 0));
  big.done = [](Result<engine::TensorMap>, const WorkTiming&) {};
  EXPECT_EQ(b.Enqueue(std::move(big)).code(), StatusCode::kInvalidArgument);
}

TEST(BatchAssembly, ConcatPadsRaggedAndSliceCuts) {
  engine::TensorMap a, c;
  a.emplace("x", Ids(1, 2, 5));
  c.emplace("x", Ids(2, 3, 7));
  auto m = ConcatInputs({&a, &c}, {"x"});
  ASSERT_TRUE(m.ok());
  const Tensor& x = m->at("x");
  EXPECT_EQ(x.shape(), (Shape{3, 3}));
  std::vector<int64_t> want = {5, 5, 0, 7, 7, 7, 7, 7, 7};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(x.data_as<int64_t>()[i], want[i]) << i;
  Tensor row0 = SliceRows(x, 0, 1, 2);
  EXPECT_EQ(row0.shape(), (Shape{1, 2}));
  EXPECT_EQ(row0.data_as<int64_t>()[1], 5);
  Tensor rows = SliceRows(x, 1, 2, 0);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  EXPECT_EQ(rows.data_as<int64_t>()[5], 7);
}

}  // namespace
}  // namespace surge::serve
