// Stand-in CPU comm suite (shmcomm tests): its gtest main, as pto-isa's CPU comm suites write it.
#include <gtest/gtest.h>

#include "tstandin_kernel.h"
#include "pto/common/cpu_stub.hpp"

TEST(StandinRing, TwoRanks)
{
    SKIP_IF_RANKS_LT(2);
    ASSERT_TRUE(RunRing(2));
}
TEST(StandinRing, FourRanks)
{
    SKIP_IF_RANKS_LT(4);
    ASSERT_TRUE(RunRing(4));
}
TEST(StandinRing, EightRanks)
{
    SKIP_IF_RANKS_LT(8);
    ASSERT_TRUE(RunRing(8));
}
TEST(StandinScatter, Root1_SentToItself)
{
    SKIP_IF_RANKS_LT(2);
    ASSERT_TRUE(RunSelfSend(2, 1));
}
TEST(StandinHang, DISABLED_NeverNotified)
{
    SKIP_IF_RANKS_LT(2);
    ASSERT_TRUE(RunNeverNotified(2));
}
TEST(StandinCrash, DISABLED_Rank1Crashes)
{
    SKIP_IF_RANKS_LT(2);
    ASSERT_TRUE(RunCrash(2));
}

int main(int argc, char** argv)
{
    CommMpiInit(&argc, &argv);
    ::testing::InitGoogleTest(&argc, argv);
    int ret = RUN_ALL_TESTS();
    CommMpiFinalize();
    return ret;
}
