// Times Piper's C++ DP (msr-fiddle/piper, algo.cpp) on one configuration; used by benchmarks/joint_speed.py.
//
// This file is ours; algo.cpp and nlohmann/json.hpp are not committed here: joint_speed.py copies them
// out of a Piper checkout into scratch/piper_build/ and compiles this file there with
//     g++ -O3 -std=c++17 -I scratch/piper_build benchmarks/piper_driver.cpp -o scratch/piper_build/piper_driver
// algo.cpp's own main() (its paper's experiments) is renamed by the #define below and never called.
//
// Usage: piper_driver INPUT.json K MEMORY_BYTES BANDWIDTH_BYTES_PER_S
// reads the instance as algo.cpp's readResnet()/readGNMT()/readBERTA100(32) do (the file's mbsInBatch is
// kept), then sets maxDevices, maxMemoryPerDevice and bandwidth as its runResnet()/runGNMT()/plots() do,
// before building the Graph (its constructor fixes boundOnS = min(mbsInBatch, maxDevices) from them).
// Prints one JSON line on stdout:
//     {"tps": <time per sample of the DP's plan by getTPSForResult, or null when infeasible>,
//      "stages": <number of stages>, "read_s": ..., "graph_s": ..., "dp_s": ..., "total_s": ...}
// dp_s is runDP() alone (DP and plan reconstruction), graph_s the Graph constructor (ideal enumeration),
// total_s everything from reading the file to the plan's value; steady clock, one thread.
// Piper's own progress lines go to stderr.

#include <chrono>

#define main piper_algo_main
#include "algo.cpp"
#undef main

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 5) {
        cerr << "usage: " << argv[0] << " INPUT.json K MEMORY_BYTES BANDWIDTH_BYTES_PER_S" << endl;
        return 2;
    }
    const auto start = std::chrono::steady_clock::now();
    json j;
    ifstream jsonfile(argv[1]);
    if (!jsonfile) {
        cerr << "cannot open " << argv[1] << endl;
        return 2;
    }
    jsonfile >> j;
    Instance ins = j.get<Instance>();
    ins.maxDevices = stoi(argv[2]);
    ins.maxMemoryPerDevice = stod(argv[3]);
    ins.bandwidth = stod(argv[4]);
    ins.checkInputCorrectness();
    const double readSeconds = secondsSince(start);

    const auto graphStart = std::chrono::steady_clock::now();
    Graph g(ins);
    const double graphSeconds = secondsSince(graphStart);

    const auto dpStart = std::chrono::steady_clock::now();
    const Result result = g.runDP();
    const double dpSeconds = secondsSince(dpStart);

    const double tps = g.getTPSForResult(result);  // INFTY for an empty (infeasible) result
    const double totalSeconds = secondsSince(start);

    cout << setprecision(17) << "{\"tps\": ";
    if (result.stages.empty() || tps > INFTY / 2) {
        cout << "null";
    } else {
        cout << tps;
    }
    cout << ", \"stages\": " << result.stages.size() << ", \"read_s\": " << readSeconds << ", \"graph_s\": "
         << graphSeconds << ", \"dp_s\": " << dpSeconds << ", \"total_s\": " << totalSeconds << "}" << endl;
    return 0;
}
