#include "core/failure/timeline.h"

#include <cmath>

#include <gtest/gtest.h>
#include <json/json.h>

#include <algorithm>
#include <fstream>
#include <memory>

namespace autopar {
namespace {

JournalEvent Ev(double t, const char* node, const char* kind, int rank = -1, int64_t step = -1,
                std::string detail = "") {
  JournalEvent e;
  e.time = t;
  e.node = node;
  e.job_id = "42";
  e.kind = kind;
  e.rank = rank;
  e.step = step;
  e.detail = std::move(detail);
  return e;
}

TEST(EventFieldsTest, FormatAndParseRoundTrip) {
  struct Case {
    EventFields fields;
    const char* text;
  } cases[] = {
      {{}, ""},
      {{{"class", "rank-crash"}, {"exit", "1"}}, "class=rank-crash exit=1"},
      {{{"reason", "rank 3 on node2 exited"}}, "reason=\"rank 3 on node2 exited\""},
      {{{"q", "say \"hi\" \\o/"}}, "q=\"say \\\"hi\\\" \\\\o/\""},
      {{{"empty", ""}, {"eq", "a=b"}}, "empty=\"\" eq=\"a=b\""},
      {{{"exclude", "node2,node3"}, {"delay_s", "5.0"}}, "exclude=node2,node3 delay_s=5.0"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FormatEventFields(c.fields), c.text);
    EXPECT_EQ(ParseEventFields(c.text), c.fields) << c.text;
  }
  EXPECT_EQ(FormatEventFields({{"bad key", "v"}}), "bad_key=v");
}

TEST(EventFieldsTest, FreeTextIsKeptUnderText) {
  EventFields f = ParseEventFields("resumed from the latest step=40 ok");
  EventFields want = {{"step", "40"}, {"text", "resumed from the latest ok"}};
  EXPECT_EQ(f, want);
}

TEST(TimelineTest, MergeOrdersByTimeAndDropsDuplicates) {
  std::vector<JournalEvent> node1 = {Ev(10, "node1", "step-started"), Ev(30, "node1", "failure"),
                                     Ev(12, "node1", "rendezvous")};
  std::vector<JournalEvent> node2 = {Ev(11, "node2", "step-started"), Ev(30, "node2", "failure"),
                                     Ev(40, "node2", "requeue")};
  std::vector<JournalEvent> again = {Ev(40, "node2", "requeue")};  // read twice
  auto merged = MergeTimelines({node2, node1, again});
  std::vector<std::string> got;
  for (const auto& e : merged) got.push_back(e.node + ":" + e.kind);
  std::vector<std::string> want = {"node1:step-started", "node2:step-started", "node1:rendezvous",
                                   "node1:failure",      "node2:failure",      "node2:requeue"};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(MergeTimelines({}).empty());
}

TEST(TimelineTest, TimeFormat) {
  EXPECT_EQ(FormatEventTime(0, true), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatEventTime(1796029262.345, false), "2026-11-30 09:01:02.345");
  EXPECT_EQ(FormatEventTime(59.9996, true), "1970-01-01T00:01:00.000Z");  // rounds up
  // Times read from storage may be anything (fuzz/journal_fuzz): clamped, never undefined.
  EXPECT_EQ(FormatEventTime(1.7e128, true), "9999-12-31T23:59:59.000Z");
  EXPECT_EQ(FormatEventTime(std::nan(""), true), "1970-01-01T00:00:00.000Z");
}

TEST(TimelineTest, TableRendering) {
  std::vector<JournalEvent> events = {
      Ev(1000, "node1", "step-started", -1, -1, "nodes=node[1-2] restart=0"),
      Ev(1002.5, "node2", "failure", 3, 41, "class=rank-crash signal=9"),
      Ev(1010.25, "node1", "requeue", -1, -1, "attempt=1 of=3"),
  };
  std::string want =
      "TIME (UTC)                  +SECONDS  NODE    RANK    STEP  KIND          DETAIL\n"
      "1970-01-01 00:16:40.000        0.000  node1      -       -  step-started  nodes=node[1-2] restart=0\n"
      "1970-01-01 00:16:42.500        2.500  node2      3      41  failure       class=rank-crash signal=9\n"
      "1970-01-01 00:16:50.250       10.250  node1      -       -  requeue       attempt=1 of=3\n"
      "3 events from 2 nodes\n";
  EXPECT_EQ(RenderEventsTable("42", events), want);
  EXPECT_EQ(RenderEventsTable("42", {}), "no events for job 42\n");
}

TEST(TimelineTest, PerRankCheckpointRowsFoldPerStepAndRun) {
  std::vector<JournalEvent> events = {
      Ev(1, "node1", "step_started", 0, -1, "restart=0"),
      Ev(2, "node1", "ckpt_committed", 0, 5, "10 bytes"),
      Ev(2.1, "node2", "ckpt_committed", 2, 5, "12 bytes"),
      Ev(2.2, "node1", "ckpt_committed", 1, 5, "11 bytes"),
      Ev(2.3, "node2", "ckpt_committed", 3, 5, "13 bytes"),
      Ev(3, "node2", "ckpt_complete", -1, 5, "manifest"),
      Ev(3.1, "node1", "ckpt_complete", -1, 5, "manifest"),
      Ev(4, "node1", "ckpt_committed", 0, 9, "10 bytes"),  // one rank only: unchanged
      Ev(5, "node2", "failure", 3, -1, "class=rank-crash"),
      Ev(6, "node2", "requeue", -1, -1, "attempt=1"),
      Ev(7, "node1", "ckpt_restored", 0, 5, "a"),  // a new run: not folded with the old ones
      Ev(7.1, "node2", "ckpt_restored", 2, 5, "b"),
  };
  size_t saved = 0;
  auto rows = FoldPerRankEvents(events, &saved);
  EXPECT_EQ(saved, 5u);
  std::vector<std::string> got;
  for (const auto& e : rows) {
    got.push_back(e.node + "|" + std::to_string(e.rank) + "|" + e.kind + "|" + e.detail);
  }
  EXPECT_EQ(got, (std::vector<std::string>{
                     "node1|0|step_started|restart=0",
                     "node1+1|-1|ckpt_committed|4 events, ranks 0-3 on 2 nodes: 10 bytes",
                     "node1+1|-1|ckpt_complete|2 events on 2 nodes: manifest",
                     "node1|0|ckpt_committed|10 bytes",
                     "node2|3|failure|class=rank-crash",
                     "node2|-1|requeue|attempt=1",
                     "node1+1|-1|ckpt_restored|2 events, ranks 0,2 on 2 nodes: a",
                 }));
  std::string table = RenderEventsTable("42", events, /*fold_per_rank=*/true);
  EXPECT_NE(table.find("\n12 events from 2 nodes (per-rank checkpoint events folded into 7 rows; "
                       "--all shows each)\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(RenderEventsTable("42", events, true).size() < RenderEventsTable("42", events).size(),
            true);
}

TEST(TimelineTest, RestoredRowsOfAnInPlaceRestartFoldPerGeneration) {
  std::vector<JournalEvent> events = {
      Ev(1, "node1", "restarted", 0, -1, "generation=1"),
      Ev(2, "node1", "restored", 0, 5, "generation=1 bytes_local=10"),
      Ev(2.1, "node2", "restored", 2, 5, "generation=1 bytes_local=12"),
      Ev(3, "node1", "restarted", 0, -1, "generation=2"),  // the same step again: its own row
      Ev(4, "node1", "restored", 0, 5, "generation=2 bytes_local=10"),
      Ev(4.1, "node2", "restored", 2, 5, "generation=2 bytes_local=12"),
  };
  size_t saved = 0;
  auto rows = FoldPerRankEvents(events, &saved);
  EXPECT_EQ(saved, 2u);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].detail, "2 events, ranks 0,2 on 2 nodes: generation=1 bytes_local=10");
  EXPECT_EQ(rows[3].detail, "2 events, ranks 0,2 on 2 nodes: generation=2 bytes_local=10");
}

TEST(TimelineTest, JsonRoundTrip) {
  std::vector<JournalEvent> events = {
      Ev(1000.125, "node1", "submitted", -1, -1, "plan=\"tp=1,pp=1,dp=4\""),
      Ev(1001, "node2", "ckpt-complete", -1, 40, "duration_s=2.5"),
  };
  std::string json = EncodeEventsJson("42", events);
  EXPECT_NE(json.find("\"time_utc\":\"1970-01-01T00:16:40.125Z\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"fields\":{\"plan\":\"tp=1,pp=1,dp=4\"}"), std::string::npos) << json;
  auto back = DecodeEventsJson(json);
  ASSERT_TRUE(back.ok()) << back.message();
  ASSERT_EQ(back->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_DOUBLE_EQ((*back)[i].time, events[i].time);
    EXPECT_EQ((*back)[i].node, events[i].node);
    EXPECT_EQ((*back)[i].job_id, "42");
    EXPECT_EQ((*back)[i].kind, events[i].kind);
    EXPECT_EQ((*back)[i].rank, events[i].rank);
    EXPECT_EQ((*back)[i].step, events[i].step);
    EXPECT_EQ((*back)[i].detail, events[i].detail);
  }
  EXPECT_EQ(EncodeEventsJson("42", {}), "{\"job_id\": \"42\", \"events\": []}\n");
}

TEST(TimelineTest, JsonOfAnyDetailIsValidAndFieldsHoldEachKeyOnce) {
  // A repeated key (the last one kept, as a JSON object holds each key once), quotes, a control
  // character and a byte that is not UTF-8 (it comes back as U+FFFD).
  std::vector<JournalEvent> events = {
      Ev(1000.5, "node\xc3\xa9", "note", 0, 3, "a=1 a=2 q=\"x \\\"y\\\"\" t=\x01 \xff"),
  };
  const std::string json = EncodeEventsJson("4\"2", events);
  Json::CharReaderBuilder b;
  std::unique_ptr<Json::CharReader> reader(b.newCharReader());
  Json::Value v;
  std::string err;
  ASSERT_TRUE(reader->parse(json.data(), json.data() + json.size(), &v, &err)) << err << json;
  EXPECT_EQ(v["job_id"].asString(), "4\"2");
  const Json::Value& e = v["events"][0];
  EXPECT_EQ(e["fields"]["a"].asString(), "2") << json;
  EXPECT_EQ(e["fields"]["q"].asString(), "x \"y\"") << json;
  EXPECT_EQ(e["node"].asString(), "node\xc3\xa9");
  EXPECT_EQ(e["time"].asDouble(), 1000.5);
  auto back = DecodeEventsJson(json);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ((*back)[0].detail, "a=1 a=2 q=\"x \\\"y\\\"\" t=\x01 \xef\xbf\xbd");
  // The published segment too.
  auto seg = DecodePublishedJournal(EncodePublishedJournal({"42", "node\xff", 7, 1.25, events}));
  ASSERT_TRUE(seg.ok()) << seg.message();
  EXPECT_EQ(seg->node, "node\xef\xbf\xbd");
  EXPECT_EQ(seg->uid, 7);
  EXPECT_EQ(seg->updated, 1.25);
  EXPECT_EQ(seg->events[0].step, 3);
}

TEST(TimelineTest, JsonErrorsNameTheField) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"not json", "events JSON: "},
      {"{\"x\": 1}", "no \"events\" array"},
      {"{\"events\": [1]}", "events[0]: not an object"},
      {"{\"events\": [{\"time\": \"x\", \"kind\": \"a\"}]}", "events[0]: time: not a number"},
      {"{\"events\": [{\"time\": 1}]}", "events[0]: kind: missing"},
      {"{\"events\": [{\"time\": 1, \"kind\": \"a\", \"rank\": 1.5}]}", "events[0]: rank: not an integer"},
      {"{\"events\": [{\"time\": 1, \"kind\": \"a\", \"node\": 3}]}", "events[0]: node: not a string"},
  };
  for (const auto& c : cases) {
    auto r = DecodeEventsJson(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.message().find(c.error), std::string::npos) << r.message();
  }
}

TEST(PublishedJournalTest, RoundTripAndKeys) {
  PublishedJournal j;
  j.job_id = "42";
  j.node = "node2";
  j.uid = 1001;
  j.updated = 1796029262.125;
  j.events = {Ev(1796029261.0001, "node2", "failure", 3, -1, "class=rank-crash signal=9"),
              Ev(1796029262.5, "node2", "requeue", -1, -1, "attempt=1 of=3")};
  std::string text = EncodePublishedJournal(j);
  auto back = DecodePublishedJournal(text);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->job_id, "42");
  EXPECT_EQ(back->node, "node2");
  EXPECT_EQ(back->uid, 1001);
  EXPECT_EQ(back->updated, j.updated);
  ASSERT_EQ(back->events.size(), 2u);
  // Times survive exactly, so merging a journal read twice keeps each event once.
  EXPECT_EQ(MergeTimelines({j.events, back->events}).size(), 2u);
  // It is also an events document: the CLI's decoder reads it.
  auto as_events = DecodeEventsJson(text);
  ASSERT_TRUE(as_events.ok()) << as_events.message();
  EXPECT_EQ(as_events->size(), 2u);

  EXPECT_EQ(PublishedJournalKey("42", "node1"), "42/node1.json");
  EXPECT_EQ(PublishedJournalKey("42", "../x y"), "42/.._x_y.json");
  EXPECT_EQ(PublishedJournalKey("42", ".."), "42/_.json");
  EXPECT_EQ(PublishedJournalPrefix("42"), "42/");
  EXPECT_EQ(PublishedJournalKey("42", "n").rfind(PublishedJournalPrefix("42"), 0), 0u);
}

TEST(PublishedJournalTest, SegmentKeys) {
  EXPECT_EQ(PublishedSegmentKey("42", "node1", 12, 345), "42/node1/000000000012-000000000345.json");
  EXPECT_EQ(PublishedSegmentKey("42", "../x", 1, 1), "42/.._x/000000000001-000000000001.json");
  struct Case {
    std::string key;
    bool ok;
    std::string node;
    int64_t first, last;
    bool whole;
  } cases[] = {
      {"42/node1/000000000012-000000000345.json", true, "node1", 12, 345, false},
      {"42/node1/7-7.json", true, "node1", 7, 7, false},
      {"42/node1.json", true, "node1", 0, INT64_MAX, true},  // an earlier version's whole journal
      {"42/node1/000000000012-000000000345.json.autopar-tmp-1", false, "", 0, 0, false},
      {"42/node1/12-11.json", false, "", 0, 0, false},
      {"42/node1/12.json", false, "", 0, 0, false},
      {"42/node1/a-b.json", false, "", 0, 0, false},
      {"42/node1/1-2/3-4.json", false, "", 0, 0, false},
      {"42//1-2.json", false, "", 0, 0, false},
      {"42/.json", false, "", 0, 0, false},
      {"43/node1/1-2.json", false, "", 0, 0, false},
      {"420/node1/1-2.json", false, "", 0, 0, false},
  };
  for (const auto& c : cases) {
    PublishedKey k;
    ASSERT_EQ(ParsePublishedKey("42", c.key, &k), c.ok) << c.key;
    if (!c.ok) continue;
    EXPECT_EQ(k.key, c.key);
    EXPECT_EQ(k.node, c.node) << c.key;
    EXPECT_EQ(k.first_id, c.first) << c.key;
    EXPECT_EQ(k.last_id, c.last) << c.key;
    EXPECT_EQ(k.whole, c.whole) << c.key;
  }
}

TEST(PublishedJournalTest, CoveringSegmentsDropWhatACompactionReplaced) {
  auto keys = [](std::vector<std::string> names) {
    std::vector<PublishedKey> out;
    for (const auto& n : names) {
      PublishedKey k;
      EXPECT_TRUE(ParsePublishedKey("42", n, &k)) << n;
      out.push_back(k);
    }
    return out;
  };
  auto names = [](const std::vector<PublishedKey>& ks) {
    std::vector<std::string> out;
    for (const auto& k : ks) out.push_back(k.key);
    return out;
  };
  // nodeA: 1-4 compacted from 1-1..4-4, whose deletion was interrupted (2-2 and 4-4 remain);
  // nodeB: untouched segments; an earlier version's whole journal of nodeA is kept as it is.
  std::vector<std::string> given = {"42/nodeB/3-3.json", "42/nodeA/4-4.json", "42/nodeA/1-4.json",
                                    "42/nodeA/2-2.json", "42/nodeA/5-9.json", "42/nodeB/1-2.json",
                                    "42/nodeA.json"};
  EXPECT_EQ(names(CoveringSegments(keys(given))),
            (std::vector<std::string>{"42/nodeA.json", "42/nodeA/1-4.json", "42/nodeA/5-9.json",
                                      "42/nodeB/1-2.json", "42/nodeB/3-3.json"}));
  EXPECT_TRUE(CoveringSegments({}).empty());
}

TEST(PublishedJournalTest, ErrorsNameTheField) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {"[", "published journal: "},
      {"[]", "not a JSON object"},
      {"{\"job_id\": 4, \"node\": \"n\", \"uid\": 0, \"events\": []}", "job_id: not a string"},
      {"{\"job_id\": \"4\", \"node\": \"n\", \"uid\": \"0\", \"events\": []}", "uid: not an integer"},
      {"{\"job_id\": \"4\", \"node\": \"n\", \"uid\": 0}", "no \"events\" array"},
      {"{\"job_id\": \"4\", \"node\": \"n\", \"uid\": 0, \"events\": [{\"time\": 1}]}",
       "events[0]: kind: missing"},
      // Integers beyond their field's range (fuzz/journal_fuzz: they used to throw).
      {"{\"job_id\": \"4\", \"node\": \"n\", \"uid\": 17055555555555555555, "
       "\"events\": []}",
       "uid: not an integer"},
      {"{\"job_id\": \"4\", \"node\": \"n\", \"uid\": 0, \"events\": [{\"time\": 1, "
       "\"kind\": \"k\", \"rank\": 4294967296}]}",
       "events[0]: rank: not an integer"},
  };
  for (const auto& c : cases) {
    auto r = DecodePublishedJournal(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.message().find(c.error), std::string::npos) << r.message();
  }
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

// docs/events.md lists every kind once, and no other: its table rows' first cells.
TEST(Timeline, TheEventsPageListsEveryKindAndNoOther) {
  std::ifstream in(AUTOPAR_SOURCE_DIR "/docs/events.md");
  ASSERT_TRUE(in) << "docs/events.md";
  std::vector<std::string> listed;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    listed.push_back(line.substr(3, end - 3));
  }
  std::vector<std::string> kinds = AllEventKinds();
  std::sort(listed.begin(), listed.end());
  std::sort(kinds.begin(), kinds.end());
  EXPECT_EQ(listed, kinds);
  EXPECT_EQ(std::adjacent_find(kinds.begin(), kinds.end()), kinds.end());  // each kind once
}

TEST(TimelineTest, ParseEventTimeIsFormatEventTimesInverse) {
  const double t = 1796652811.25;
  EXPECT_DOUBLE_EQ(*ParseEventTime(FormatEventTime(t, false)), t);
  EXPECT_DOUBLE_EQ(*ParseEventTime(FormatEventTime(t, true)), t);
  EXPECT_DOUBLE_EQ(*ParseEventTime("2026-12-07"), 1796601600);
  EXPECT_DOUBLE_EQ(*ParseEventTime("2026-12-07T00:01"), 1796601660);
  for (const char* bad : {"", "2026-12", "2026-12-07T14", "2026-13-01", "2026-12-07 10:00:00 x",
                          "2026-12-07 10:00Z"}) {
    EXPECT_FALSE(ParseEventTime(bad)) << bad;
  }
}

}  // namespace
}  // namespace autopar
