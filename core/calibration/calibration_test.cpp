#include "core/calibration/calibration.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/health/report.h"
#include "core/plan/plan_request_for_test.h"

namespace autopar {
namespace {

constexpr char kFile[] = R"({"gpus": {
  "a100-80gb": {"factor": 0.5, "job": "1234", "model": "gpt3-1.3b", "layout": "tp=1 pp=1 dp=4",
                "planned_mfu": 0.2, "measured_mfu": 0.1, "windows": 8,
                "date": "2026-12-02T09:10:04.000Z"},
  "h100": {"factor": 1.25, "job": "77"}}})";

// --- the file ---------------------------------------------------------------------------

TEST(CalibrationFile, ParsesEntriesUnderTheirPresetNames) {
  auto f = ParseCalibration(kFile);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ(f->gpus.size(), 2u);
  const CalibrationEntry& a = f->gpus.at("a100-80gb");
  EXPECT_DOUBLE_EQ(a.factor, 0.5);
  EXPECT_EQ(a.job, "1234");
  EXPECT_EQ(a.model, "gpt3-1.3b");
  EXPECT_EQ(a.layout, "tp=1 pp=1 dp=4");
  EXPECT_DOUBLE_EQ(*a.planned_mfu, 0.2);
  EXPECT_DOUBLE_EQ(*a.measured_mfu, 0.1);
  EXPECT_EQ(a.windows, 8);
  EXPECT_EQ(a.date, "2026-12-02T09:10:04.000Z");
  // An alias is stored under its preset's name.
  EXPECT_DOUBLE_EQ(f->gpus.at("h100-80gb").factor, 1.25);
  auto cal = f->For("h100-80gb");
  ASSERT_TRUE(cal);
  EXPECT_EQ(CalibrationLabel(*cal), "calibrated x1.25 from job 77");
  EXPECT_FALSE(f->For("a100-40gb"));  // a GPU type not in the file: no calibration
}

TEST(CalibrationFile, RoundTripsThroughItsJson) {
  auto f = ParseCalibration(kFile);
  ASSERT_TRUE(f.ok());
  auto again = ParseCalibration(CalibrationToJson(*f));
  ASSERT_TRUE(again.ok()) << again.message() << "\n" << CalibrationToJson(*f);
  EXPECT_EQ(CalibrationToJson(*again), CalibrationToJson(*f));
  EXPECT_EQ(again->gpus.at("a100-80gb").windows, 8);
  EXPECT_EQ(again->gpus.at("h100-80gb").job, "77");
  EXPECT_TRUE(ParseCalibration(R"({"gpus": {}})").ok());
}

TEST(CalibrationFile, RefusesBadInputNamingTheKey) {
  struct Case {
    const char* json;
    const char* want;
  } cases[] = {
      {R"({"gpus": {"a100-80gb": {"factor": 0.5, "job": "1")", "not valid JSON: line 1, column"},
      {R"([1, 2])", "must be a JSON object with 'gpus'"},
      {R"({"colour": 1, "gpus": {}})", "'colour': unknown key (gpus)"},
      {R"({})", "'gpus': missing or not an object of GPU types"},
      {R"({"gpus": {"v99": {"factor": 0.5, "job": "1"}}})",
       "'gpus.v99': unknown GPU type 'v99' (known: a100-40gb, a100-80gb, h100-80gb, h200-141gb)"},
      {R"({"gpus": {"a100": {"factor": 0.5, "job": "1"}, "a100-80gb": {"factor": 0.6, "job": "2"}}})",
       "'gpus.a100-80gb': the same GPU type as 'gpus.a100'"},
      {R"({"gpus": {"a100-80gb": 0.5}})",
       "'gpus.a100-80gb': must be an object with 'factor' and 'job'"},
      {R"({"gpus": {"a100-80gb": {"factor": 0, "job": "1"}}})",
       "'gpus.a100-80gb.factor': must be a number in (0, 2], got 0"},
      {R"({"gpus": {"a100-80gb": {"factor": 2.5, "job": "1"}}})",
       "'gpus.a100-80gb.factor': must be a number in (0, 2], got 2.5"},
      {R"({"gpus": {"a100-80gb": {"factor": -0.5, "job": "1"}}})",
       "'gpus.a100-80gb.factor': must be a number in (0, 2], got -0.5"},
      {R"({"gpus": {"a100-80gb": {"factor": "0.5", "job": "1"}}})",
       "'gpus.a100-80gb.factor': must be a number in (0, 2], got \"0.5\""},
      {R"({"gpus": {"a100-80gb": {"job": "1"}}})", "'gpus.a100-80gb.factor': missing"},
      {R"({"gpus": {"a100-80gb": {"factor": 0.5}}})", "'gpus.a100-80gb.job': missing"},
      {R"({"gpus": {"a100-80gb": {"factor": 0.5, "job": 12}}})",
       "'gpus.a100-80gb.job': must be a string"},
      {R"({"gpus": {"a100-80gb": {"factor": 0.5, "job": "1", "windows": -1}}})",
       "'gpus.a100-80gb.windows': must be an integer >= 0"},
      {R"({"gpus": {"a100-80gb": {"factor": 0.5, "job": "1", "speed": 2}}})",
       "'gpus.a100-80gb.speed': unknown key"},
  };
  for (const auto& c : cases) {
    auto r = ParseCalibration(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.message().rfind(c.want, 0), 0u) << c.json << "\n" << r.message();
    EXPECT_EQ(r.message().find('\n'), std::string::npos) << r.message();
  }
}

class CalibrationFileOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "calibration_test_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
    std::remove(path_.c_str());
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void Write(const std::string& text) { std::ofstream(path_) << text; }
  std::string path_;
};

TEST_F(CalibrationFileOnDisk, ReadsNamesThePathInErrorsAndMissingIsEmptyOnlyWhenAsked) {
  auto missing = ReadCalibrationFile(path_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), path_ + ": cannot read: No such file or directory");
  auto empty = ReadCalibrationFile(path_, /*missing_is_empty=*/true);
  ASSERT_TRUE(empty.ok()) << empty.message();
  EXPECT_TRUE(empty->gpus.empty());
  Write(R"({"gpus": {"a100-80gb": {"factor": 3, "job": "1"}}})");
  auto bad = ReadCalibrationFile(path_, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(), path_ + ": 'gpus.a100-80gb.factor': must be a number in (0, 2], got 3");
  Write(kFile);
  auto good = ReadCalibrationFile(path_);
  ASSERT_TRUE(good.ok()) << good.message();
  EXPECT_EQ(good->gpus.size(), 2u);
}

// --- the plan with and without it ---------------------------------------------------------

void ExpectScaled(const PlanCandidate& raw, const PlanCandidate& cal, double f) {
  EXPECT_DOUBLE_EQ(cal.step_time_s, raw.step_time_s / f);
  EXPECT_DOUBLE_EQ(cal.mfu, raw.mfu * f);
  EXPECT_DOUBLE_EQ(cal.tokens_per_s, raw.tokens_per_s * f);
  EXPECT_DOUBLE_EQ(cal.samples_per_s, raw.samples_per_s * f);
  EXPECT_DOUBLE_EQ(cal.time.compute_s, raw.time.compute_s / f);
  EXPECT_DOUBLE_EQ(cal.time.dp_comm_exposed_s, raw.time.dp_comm_exposed_s / f);
  EXPECT_DOUBLE_EQ(cal.time.total_s, raw.time.total_s / f);
  EXPECT_DOUBLE_EQ(cal.memory.total_gib, raw.memory.total_gib);  // memory is not calibrated
}

TEST(CalibratedPlan, DiffersExactlyByTheFactorInStepTimeAndMfu) {
  struct Case {
    const char* model;
    int64_t gpus;
    const char* gpu;
    int64_t batch, seq;
    double factor;
  } cases[] = {
      {"gpt3-1.3b", 4, "a100-80gb", 64, 128, 0.31},       // the integration test's job
      {"llama-2-70b", 64, "h100-80gb", 512, 4096, 0.87},  // pipeline, TP, sharding, DP overlap
      {"gpt3-175b", 1024, "a100-80gb", 1536, 2048, 1.4},  // a site faster than the model
      {"mixtral-8x7b", 64, "h100-80gb", 256, 4096, 0.5},  // expert parallelism
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.model);
    const PlanRequest raw_req = PlanRequestFor(c.model, c.gpus, c.gpu, c.batch, c.seq);
    PlanRequest cal_req = raw_req;
    cal_req.calibration = PlanCalibration{c.factor, "1234"};
    auto raw = PlanJob(raw_req);
    auto cal = PlanJob(cal_req);
    ASSERT_TRUE(raw.ok() && cal.ok()) << raw.message() << cal.message();
    // The same choice (every layout's time scales alike), every time divided by the factor.
    const Layout& a = raw->chosen.layout;
    const Layout& b = cal->chosen.layout;
    EXPECT_EQ(
        std::make_tuple(a.tp, a.cp, a.ep, a.pp, a.dp, a.micro_batch, a.vpp, a.recompute_layers),
        std::make_tuple(b.tp, b.cp, b.ep, b.pp, b.dp, b.micro_batch, b.vpp, b.recompute_layers));
    ExpectScaled(raw->chosen, cal->chosen, c.factor);
    ASSERT_EQ(raw->alternatives.size(), cal->alternatives.size());
    for (size_t i = 0; i < raw->alternatives.size(); ++i) {
      ExpectScaled(raw->alternatives[i], cal->alternatives[i], c.factor);
    }
    EXPECT_FALSE(raw->calibration);
    ASSERT_TRUE(cal->calibration);
    EXPECT_EQ(cal->calibration->job, "1234");
  }
}

TEST(CalibratedPlan, NamesItsCalibrationInJsonTextAndBack) {
  PlanRequest r = PlanRequestFor("gpt3-1.3b", 4, "a100-80gb", 64, 128);
  r.calibration = PlanCalibration{0.87, "1234"};
  auto plan = PlanJob(r);
  ASSERT_TRUE(plan.ok()) << plan.message();
  const std::string json = PlanToJson(*plan, false);
  EXPECT_NE(json.find(R"("calibration":{"factor":0.87,"job":"1234"})"), std::string::npos) << json;
  auto back = PlanFromJson(json);
  ASSERT_TRUE(back.ok()) << back.message();
  ASSERT_TRUE(back->calibration);
  EXPECT_DOUBLE_EQ(back->calibration->factor, 0.87);
  EXPECT_EQ(back->calibration->job, "1234");
  // Every task's plan names it too (the same JSON, made again from the plan on the node).
  bool in_task_env = false;
  for (const auto& [k, v] : PlanTaskEnv(*plan, 0)) {
    if (k == "AUTOPAR_PLAN_JSON")
      in_task_env = v.find(R"("calibration":{"factor":0.87,"job":"1234"})") != std::string::npos;
  }
  EXPECT_TRUE(in_task_env);
  const std::string text = PlanToText(*plan);
  EXPECT_NE(text.find("calibration: calibrated x0.87 from job 1234 (the site's measured a100-80gb "
                      "efficiency: every predicted time / 0.87)\n"),
            std::string::npos)
      << text;
  // Without one: no calibration key, no line.
  r.calibration.reset();
  auto raw = PlanJob(r);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(PlanToJson(*raw).find("calibration"), std::string::npos);
  EXPECT_EQ(PlanToText(*raw).find("calibration"), std::string::npos);
  EXPECT_FALSE(PlanFromJson(PlanToJson(*raw))->calibration);
}

TEST(CalibratedPlan, RefusesAFactorOutsideItsRange) {
  for (double f : {0.0, -1.0, 2.5}) {
    PlanRequest r = PlanRequestFor("gpt3-1.3b", 4, "a100-80gb", 64, 128);
    r.calibration = PlanCalibration{f, "1"};
    auto plan = PlanJob(r);
    ASSERT_FALSE(plan.ok()) << f;
    EXPECT_EQ(plan.message().rfind("calibration: the factor must be in (0, 2]", 0), 0u)
        << plan.message();
  }
}

// --- from a job's report ------------------------------------------------------------------

JournalEvent Ev(double t, const char* kind, int64_t step, const std::string& detail) {
  return JournalEvent{t, "node1", "42", kind, 0, step, detail};
}

constexpr char kSubmitted[] =
    "model=gpt3-1.3b gpus=4 tp=1 cp=1 pp=1 dp=4 micro_batch=16 grad_accum=1 recompute=none "
    "optimizer_sharding=0 mem_gib=20.0 step_s=0.100 mfu=0.2000";

// A report of a job with `windows` progress windows of the given MFUs (cycled).
JobReport Report(int windows, std::vector<const char*> mfus, bool plan = true) {
  std::vector<JournalEvent> evs;
  if (plan) evs.push_back(Ev(1000, "submitted", -1, kSubmitted));
  for (int i = 0; i < windows; ++i) {
    const std::string mfu = mfus[static_cast<size_t>(i) % mfus.size()];
    // Without a plan autopard journals the measured numbers only.
    evs.push_back(
        Ev(1010 + i, "progress", 10 * (i + 1),
           "steps=10 step_s=0.400 samples_per_s=160.00" +
               (!plan         ? std::string()
                : mfu.empty() ? std::string(" planned_step_s=0.100 planned_mfu=0.2000 note=x")
                              : " planned_step_s=0.100 planned_mfu=0.2000 mfu=" + mfu)));
  }
  return BuildReport("42", evs);
}

TEST(CalibrationFromReport, TheMedianMeasuredOverThePlannedMfu) {
  auto e = CalibrationFromReport(Report(7, {"0.0500", "0.0400", "0.0600", "0.0450"}), std::nullopt,
                                 "2026-12-02T09:10:04.000Z");
  ASSERT_TRUE(e.ok()) << e.message();
  // MFUs 0.05 0.04 0.06 0.045 0.05 0.04 0.06: median 0.05, planned 0.2.
  EXPECT_DOUBLE_EQ(e->factor, 0.25);
  EXPECT_EQ(e->job, "42");
  EXPECT_EQ(e->model, "gpt3-1.3b");
  EXPECT_EQ(e->layout, "tp=1 cp=1 pp=1 dp=4 micro_batch=16 grad_accum=1 recompute=none");
  EXPECT_DOUBLE_EQ(*e->planned_mfu, 0.2);
  EXPECT_DOUBLE_EQ(*e->measured_mfu, 0.05);
  EXPECT_EQ(e->windows, 7);
  EXPECT_EQ(e->date, "2026-12-02T09:10:04.000Z");
  // A job planned with a calibration already: its factor is the raw model's, composed.
  auto again = CalibrationFromReport(Report(5, {"0.0500"}), PlanCalibration{0.5, "7"}, "d");
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_DOUBLE_EQ(again->factor, 0.125);
}

TEST(SubmittedPlan, TheGpuTypeAndCalibrationWhenTheEventNamesThem) {
  // Today's submitted event names neither: --gpu-type says it, and the plan counts as uncalibrated.
  SubmittedPlan none = ReadSubmittedPlan({Ev(1000, "submitted", -1, kSubmitted)});
  EXPECT_EQ(none.gpu, "");
  EXPECT_FALSE(none.calibration);
  SubmittedPlan named = ReadSubmittedPlan(
      {Ev(999, "step_started", -1, "step=0 nodes=node[1-2] ranks=4 restart=0 gpu=x"),
       Ev(1000, "submitted", -1,
          std::string(kSubmitted) + " gpu=a100-80gb calibration=0.371763 calibration_job=22"),
       Ev(2000, "submitted", -1, "gpu=h100-80gb")});  // only the first counts
  EXPECT_EQ(named.gpu, "a100-80gb");
  ASSERT_TRUE(named.calibration);
  EXPECT_DOUBLE_EQ(named.calibration->factor, 0.371763);
  EXPECT_EQ(named.calibration->job, "22");
}

TEST(CalibrationFromReport, RefusesWithOneLineNamingTheJobAndTheReason) {
  struct Case {
    JobReport report;
    std::optional<PlanCalibration> planned_with;
    const char* want;
  } cases[] = {
      {Report(8, {"0.0500"}, /*plan=*/false), std::nullopt, "job 42: no plan (it was submitted"},
      {Report(0, {"0.0500"}), std::nullopt, "job 42: no progress windows"},
      {Report(4, {"0.0500"}), std::nullopt,
       "job 42: 4 progress windows, fewer than the 5 a calibration needs"},
      {Report(1, {"0.0500"}), std::nullopt, "job 42: 1 progress window, fewer than the 5"},
      {Report(8, {"0.0500", ""}), std::nullopt,
       "job 42: 4 of its 8 progress windows ran faster than the planned model can (no MFU): the "
       "program does not train the planned model"},
      {Report(8, {"0.3100"}), std::nullopt,
       "job 42: measured MFU 31.0% is 1.55x the plan's 20.0% (more than 1.5x): the program does "
       "not train the planned model"},
      {Report(8, {"0.0000"}), std::nullopt, "job 42: planned MFU 20.0%, measured 0.0%: both must"},
      {Report(8, {"0.2800"}), PlanCalibration{1.5, "7"},
       "job 42: the factor would be 2.100, outside (0, 2]"},
  };
  for (const auto& c : cases) {
    auto e = CalibrationFromReport(c.report, c.planned_with, "d");
    ASSERT_FALSE(e.ok()) << c.want;
    EXPECT_EQ(e.message().rfind(c.want, 0), 0u) << e.message();
    EXPECT_EQ(e.message().find('\n'), std::string::npos) << e.message();
  }
  // At the bound: 1.5x is still a calibration.
  EXPECT_TRUE(CalibrationFromReport(Report(5, {"0.3000"}), std::nullopt, "d").ok());
}

}  // namespace
}  // namespace autopar
