// Stand-in CPU comm suite (shmcomm tests): what tstandin_kernel.cpp defines.
#pragma once

bool RunRing(int n_ranks);
bool RunSelfSend(int n_ranks, int root);
bool RunNeverNotified(int n_ranks);
bool RunCrash(int n_ranks);
