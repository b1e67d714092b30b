// Finding N15 of the third reliability review: a sweep started in the background of a
// non-interactive shell inherits SIGINT ignored and ran on to its end when interrupted.
#include <cstdio>
#include <string>

#include "support/cli_fixture.hpp"

namespace cli_support {
namespace {

// Starts a long sweep with `&` in a non-interactive shell (std::system's), waits until its
// database exists, sends `signal`, and returns the shell's status of the sweep (128 + the
// signal's number when the signal ended it). No `timeout` in front: it would install handlers of
// its own, and the sweep would start with SIGINT at its default action.
class SweepSignals : public Cli {
 protected:
  int interrupted_status(const std::string& signal, const std::string& db_name) const {
    const fs::path db = dir_ / db_name;  // a new one: the handlers are set before it is written
    // 48 points of 2,000 requests: seconds, far longer than the wait for the database; a sweep
    // that ignored the signal would end with status 0.
    const fs::path scenario =
        file("sweep.yaml",
             "workload:\n  requests: 2000\n"
             "sweep:\n"
             "  - key: scheduler.max_running\n    values: [2, 4, 8, 16, 32, 64]\n"
             "  - key: seed\n    values: [1, 2, 3, 4, 5, 6, 7, 8]\n");
    const std::string command =
        "cd '" + dir_.string() + "' && '" + std::string(EXITSIM_CLI_PATH) + "' sweep '" +
        scenario.string() + "' --db '" + db.string() +
        "' -j 1 >/dev/null 2>&1 & pid=$!; for i in $(seq 1 400); do [ -s '" + db.string() +
        "' ] && break; sleep 0.05; done; kill -" + signal + " $pid; wait $pid; echo $? > '" +
        (dir_ / "status").string() + "'";
    if (std::system(command.c_str()) != 0)
      return -1;
    int status = -1;
    return std::sscanf(slurp(dir_ / "status").c_str(), "%d", &status) == 1 ? status : -1;
  }
};

// (That the database of an interrupted sweep resumes is
// Cli.SweepKilledMidwayResumesWithoutLosingOrRepeatingRuns.)
TEST_F(SweepSignals, SigintAndSigtermStopABackgroundSweep) {
  EXPECT_EQ(interrupted_status("INT", "int.db"), 128 + 2);
  EXPECT_EQ(interrupted_status("TERM", "term.db"), 128 + 15);
}

}  // namespace
}  // namespace cli_support
