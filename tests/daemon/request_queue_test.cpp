// The bounded queue: capacity, FIFO order, a cancelled waiter's place freed
// when it is needed, close.
#include <gtest/gtest.h>

#include "daemon/minferd/request_queue.h"

namespace minfer::daemon {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<Job> job(uint64_t id) {
  auto j = std::make_shared<Job>();
  j->id = id;
  return j;
}

TEST(RequestQueue, BoundedFifo) {
  RequestQueue q(2);
  std::vector<std::shared_ptr<Job>> dropped;
  EXPECT_TRUE(q.try_push(job(1), &dropped));
  EXPECT_TRUE(q.try_push(job(2), &dropped));
  EXPECT_FALSE(q.try_push(job(3), &dropped));
  EXPECT_TRUE(dropped.empty());
  EXPECT_EQ(q.depth(), 2u);
  EXPECT_EQ(q.pop_for(0ms)->id, 1u);
  EXPECT_EQ(q.pop_for(0ms)->id, 2u);
  EXPECT_EQ(q.pop_for(1ms), nullptr);  // timed out: the engine thread's idle tick
}

TEST(RequestQueue, CancelledWaitersGiveUpTheirPlace) {
  RequestQueue q(2);
  std::vector<std::shared_ptr<Job>> dropped;
  auto a = job(1), b = job(2);
  ASSERT_TRUE(q.try_push(a, &dropped));
  ASSERT_TRUE(q.try_push(b, &dropped));
  a->request_cancel(CancelReason::kClientGone);
  EXPECT_TRUE(q.try_push(job(3), &dropped));
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->id, 1u);
  EXPECT_EQ(q.pop_for(0ms)->id, 2u);
  EXPECT_EQ(q.pop_for(0ms)->id, 3u);
}

TEST(RequestQueue, FirstCancelReasonWins) {
  auto a = job(1);
  a->request_cancel(CancelReason::kSlowReader);
  a->request_cancel(CancelReason::kClientGone);
  EXPECT_TRUE(a->cancelled());
  EXPECT_EQ(a->cancel_reason.load(), CancelReason::kSlowReader);
}

TEST(RequestQueue, CloseRefusesPushesAndTakeAllEmpties) {
  RequestQueue q(4);
  std::vector<std::shared_ptr<Job>> dropped;
  ASSERT_TRUE(q.try_push(job(1), &dropped));
  EXPECT_EQ(q.take_all().size(), 1u);
  q.close();
  EXPECT_FALSE(q.try_push(job(2), &dropped));
  EXPECT_EQ(q.pop_for(1s), nullptr);  // returns at once when closed
}

}  // namespace
}  // namespace minfer::daemon
