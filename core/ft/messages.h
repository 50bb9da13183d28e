// The fault-tolerant group's messages (docs/ft.md), one schema for every hop: a program's join to
// its launcher and the quorum back (python/autopar/ft/channel.py is the program's end), and the
// launchers' join, forming and quorum over their restart channels (launcher/ft_group.cpp, inside
// restart_logic.h's envelope, whose sender travels as `from`). Each message is event fields
// (core/failure/timeline.h's form: key=value, no white space in a value) that start with v=1,
// its version: a message of another version is refused, naming it. No field is renamed on the
// way: a join's rank is its program's rank at every hop.
//
// The text of each message and the values it stands for are pinned by shared test vectors,
// core/ft/messages_vectors.json, which messages_test.cpp and python/tests/test_ft_messages.py
// both check, so that the C++ and the Python ends cannot drift apart. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autopar/status.h"
#include "core/failure/timeline.h"
#include "core/ft/quorum.h"

namespace autopar {

constexpr int kFtMessageVersion = 1;

// The program's request (its line "join v=1 epoch=E step=S store=ADDR:PORT"): to train in the
// quorum after epoch E (-1: its first) from step S (-1: no state); its store's address. Its rank,
// launcher and replacements are its launcher's to say (FtJoin).
struct FtProgramJoin {
  int64_t epoch = -1;
  int64_t step = -1;
  std::string store;
};
EventFields FtProgramJoinFields(const FtProgramJoin& j);
Result<FtProgramJoin> FtProgramJoinOf(const EventFields& fields);

// A launcher's join to the leader: the program's FtJoin and the epoch it left.
struct FtJoinMessage {
  FtJoin join;
  int64_t left = -1;
};
EventFields FtJoinMessageFields(const FtJoinMessage& m);
Result<FtJoinMessage> FtJoinMessageOf(const EventFields& fields);

// The quorum (to the launchers: with the launchers found lost and how long forming took; to the
// programs: the quorum alone). Fields: epoch= step= store= members=R@L@STORE@STEP,...
// heals=TO<FROM,... replaced=LAUNCHER:COUNT,... (a missing replaced= counts none).
struct FtQuorumMessage {
  FtQuorum quorum;
  std::vector<int> lost;  // launchers (step ranks)
  double formed_s = 0;
};
EventFields FtQuorumMessageFields(const FtQuorumMessage& m);
Result<FtQuorumMessage> FtQuorumMessageOf(const EventFields& fields);
// The quorum as its program gets it.
EventFields FtQuorumFields(const FtQuorum& q);
Result<FtQuorum> FtQuorumOf(const EventFields& fields);

// The group is re-formed: epoch `epoch` is given up (the leader's "forming" to the launchers,
// each launcher's "abandon" to its program).
EventFields FtGiveUpFields(int64_t epoch);
Result<int64_t> FtGiveUpOf(const EventFields& fields);

}  // namespace autopar
