// Stand-in URMA CPU comm suite (shmcomm tests): its gtest main.
#include <gtest/gtest.h>

#include "pto/common/cpu_stub.hpp"

bool RunRootPut(int n_ranks);

TEST(StandinUrma, RootPut_2Ranks)
{
    SKIP_IF_RANKS_LT(2);
    ASSERT_TRUE(RunRootPut(2));
}
TEST(StandinUrma, RootPut_3Ranks)
{
    SKIP_IF_RANKS_LT(3);
    ASSERT_TRUE(RunRootPut(3));
}

int main(int argc, char** argv)
{
    CommMpiInit(&argc, &argv);
    ::testing::InitGoogleTest(&argc, argv);
    int ret = RUN_ALL_TESTS();
    CommMpiFinalize();
    return ret;
}
