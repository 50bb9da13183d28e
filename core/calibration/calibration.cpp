// Site calibration files and the rules that make one from a job's report (calibration.h).
#include "core/calibration/calibration.h"

#include <json/json.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/failure/timeline.h"
#include "core/health/report.h"
#include "core/plan/hardware.h"
#include "core/json_fields.h"
#include "core/text.h"

namespace autopar {
namespace {

Status Bad(const std::string& key, const std::string& why) {
  return Status::Error("'" + key + "': " + why);
}

std::string Percent(double v) { return FormatFixed(v * 100, 1) + "%"; }

Status ParseEntry(const Json::Value& v, const std::string& path, CalibrationEntry* e) {
  if (!v.isObject()) return Bad(path, "must be an object with 'factor' and 'job'");
  for (const std::string& key : v.getMemberNames()) {
    const std::string k = path + "." + key;
    const Json::Value& x = v[key];
    if (key == "factor") {
      if (!x.isNumeric() || !(x.asDouble() > 0 && x.asDouble() <= 2)) {
        return Bad(k, "must be a number in (0, 2], got " + Trim(x.toStyledString()));
      }
      e->factor = x.asDouble();
    } else if (key == "job" || key == "model" || key == "layout" || key == "date") {
      if (!x.isString()) return Bad(k, "must be a string");
      (key == "job"      ? e->job
       : key == "model"  ? e->model
       : key == "layout" ? e->layout
                         : e->date) = x.asString();
    } else if (key == "planned_mfu" || key == "measured_mfu") {
      if (!x.isNumeric() || !(x.asDouble() >= 0)) return Bad(k, "must be a number >= 0");
      (key == "planned_mfu" ? e->planned_mfu : e->measured_mfu) = x.asDouble();
    } else if (key == "windows") {
      if (!x.isIntegral() || x.asInt64() < 0) return Bad(k, "must be an integer >= 0");
      e->windows = x.asInt64();
    } else {
      return Bad(k,
                 "unknown key (factor, job, model, layout, planned_mfu, measured_mfu, "
                 "windows, date)");
    }
  }
  if (!v.isMember("factor")) return Bad(path + ".factor", "missing (the calibration factor)");
  if (e->job.empty()) return Bad(path + ".job", "missing (the job it was measured on)");
  return Status::Ok();
}

}  // namespace

std::optional<PlanCalibration> CalibrationFile::For(const std::string& gpu_name) const {
  auto it = gpus.find(gpu_name);
  if (it == gpus.end()) return std::nullopt;
  return PlanCalibration{it->second.factor, it->second.job};
}

Result<CalibrationFile> ParseCalibration(const std::string& json) {
  Json::CharReaderBuilder builder;
  builder["rejectDupKeys"] = true;
  Json::Value root;
  std::string errors;
  std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
  if (!reader->parse(json.data(), json.data() + json.size(), &root, &errors)) {
    return Status::Error("not valid JSON: " + JsonParseError(errors));
  }
  if (!root.isObject()) return Status::Error("must be a JSON object with 'gpus'");
  for (const std::string& key : root.getMemberNames()) {
    if (key != "gpus") return Bad(key, "unknown key (gpus)");
  }
  const Json::Value& gpus = root["gpus"];
  if (!gpus.isObject()) return Bad("gpus", "missing or not an object of GPU types");
  CalibrationFile file;
  std::map<std::string, std::string> given_as;  // preset name -> the key that named it
  for (const std::string& key : gpus.getMemberNames()) {
    const std::string path = "gpus." + key;
    auto gpu = ResolveGpuType(key);
    if (!gpu) return Bad(path, gpu.message());
    if (given_as.count(gpu->name)) {
      return Bad(path, "the same GPU type as 'gpus." + given_as[gpu->name] + "'");
    }
    given_as[gpu->name] = key;
    CalibrationEntry e;
    if (Status s = ParseEntry(gpus[key], path, &e); !s) return s;
    file.gpus[gpu->name] = e;
  }
  return file;
}

std::string CalibrationToJson(const CalibrationFile& file) {
  Json::Value root(Json::objectValue);
  root["gpus"] = Json::Value(Json::objectValue);
  for (const auto& [gpu, e] : file.gpus) {
    Json::Value v(Json::objectValue);
    v["factor"] = e.factor;
    v["job"] = e.job;
    if (!e.model.empty()) v["model"] = e.model;
    if (!e.layout.empty()) v["layout"] = e.layout;
    if (e.planned_mfu) v["planned_mfu"] = *e.planned_mfu;
    if (e.measured_mfu) v["measured_mfu"] = *e.measured_mfu;
    v["windows"] = Json::Int64(e.windows);
    if (!e.date.empty()) v["date"] = e.date;
    root["gpus"][gpu] = v;
  }
  Json::StreamWriterBuilder w;
  w["indentation"] = "  ";
  w["precision"] = 6;
  return Json::writeString(w, root) + "\n";
}

Result<CalibrationFile> ReadCalibrationFile(const std::string& path, bool missing_is_empty) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    if (missing_is_empty && err == ENOENT) return CalibrationFile{};
    return Status::Error(path + ": cannot read: " + std::strerror(err));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Error(path + ": cannot read: " + std::strerror(errno));
  auto file = ParseCalibration(text.str());
  if (!file) return Status::Error(path + ": " + file.message());
  return file;
}

SubmittedPlan ReadSubmittedPlan(const std::vector<JournalEvent>& events) {
  SubmittedPlan out;
  for (const JournalEvent& e : events) {
    if (e.kind != event_kind::kSubmitted) continue;
    std::string factor, job;
    for (const auto& [k, v] : ParseEventFields(e.detail)) {
      if (k == "gpu") out.gpu = v;
      if (k == "calibration") factor = v;
      if (k == "calibration_job") job = v;
    }
    char* end = nullptr;
    const double f = std::strtod(factor.c_str(), &end);
    if (!factor.empty() && *end == '\0') out.calibration = PlanCalibration{f, job};
    break;  // the first: the plan the job was submitted with
  }
  return out;
}

Result<CalibrationEntry> CalibrationFromReport(const JobReport& r,
                                               const std::optional<PlanCalibration>& planned_with,
                                               const std::string& date) {
  const std::string job = "job " + r.job_id + ": ";
  if (!r.planned_mfu) {
    return Status::Error(job +
                         "no plan (it was submitted without --auto-parallel): there is no "
                         "predicted MFU to calibrate");
  }
  if (r.progress.empty()) {
    return Status::Error(job +
                         "no progress windows (rank 0's heartbeats carried no samples or "
                         "tokens, or the job ran shorter than one window): nothing measured");
  }
  int64_t with_mfu = 0;
  for (const auto& w : r.progress) with_mfu += w.mfu.has_value();
  if (with_mfu < static_cast<int64_t>(r.progress.size())) {
    return Status::Error(job + std::to_string(static_cast<int64_t>(r.progress.size()) - with_mfu) +
                         " of its " + std::to_string(r.progress.size()) +
                         " progress windows ran faster than the planned model can (no MFU): the "
                         "program does not train the planned model");
  }
  if (with_mfu < kMinCalibrationWindows || !r.mfu) {
    return Status::Error(job + std::to_string(with_mfu) + " progress window" +
                         (with_mfu == 1 ? "" : "s") + ", fewer than the " +
                         std::to_string(kMinCalibrationWindows) +
                         " a calibration needs (let it train longer)");
  }
  const double planned = *r.planned_mfu, measured = *r.mfu;
  if (!(planned > 0) || !std::isfinite(planned) || !(measured > 0) || !std::isfinite(measured)) {
    return Status::Error(job + "planned MFU " + Percent(planned) + ", measured " +
                         Percent(measured) + ": both must be above 0");
  }
  const double ratio = measured / planned;
  if (ratio > kMaxMeasuredOverPlanned) {
    return Status::Error(job + "measured MFU " + Percent(measured) + " is " +
                         FormatFixed(ratio, 2) + "x the plan's " + Percent(planned) +
                         " (more than " + FormatFixed(kMaxMeasuredOverPlanned, 1) +
                         "x): the program does not train the planned model");
  }
  CalibrationEntry e;
  e.factor = (planned_with ? planned_with->factor : 1.0) * ratio;
  if (!(e.factor > 0 && e.factor <= 2)) {
    return Status::Error(job + "the factor would be " + FormatFixed(e.factor, 3) +
                         ", outside (0, 2]");
  }
  e.job = r.job_id;
  e.model = r.model;
  e.layout = r.layout;
  e.planned_mfu = planned;
  e.measured_mfu = measured;
  e.windows = with_mfu;
  e.date = date;
  return e;
}

}  // namespace autopar
