// Recall's ranking asked offline, in seconds rather than a replay's minutes:
// a conversation of tools/replay_data is indexed as a replica's copy would
// hold it (storage/history_index.h) up to some turns before each question,
// searched, and ranked into a section of 640 and of 1,600 tokens (an 8k and
// a 32k window's); a question counts as found when its fact's text is in
// the section. No view around it: items the view would show verbatim are
// not skipped, so the turns just before the question are left out of the
// copy instead (kRecentTurns).
//
//   bazel run -c opt //tools:recall_eval -- --data=platform \
//       --questions=$PWD/tools/replay_data/platform_dev_questions.jsonl [--verbose]
//
// --questions: JSON lines {"fact": ID or "" for a question about nothing
// the conversation holds, "turn": when it is asked, "question": text}.
// Without it, the recall questions of NAME_probes.jsonl (or --probes=FILE),
// asked at their turns. Questions whose fact is newer than the copy are left
// out (the view shows those). --show=FACT prints that question's section;
// --verbose lists the questions missed (those whose fact's item was not among
// the candidates said so) and what unrelated ones recalled.
// Every run says of the questions missed within 1,600 tokens how many
// had their fact's item among the candidates (the ranking missed it) and
// how many not (the search did): totals, for the held-out sets too.
// The development questions of tools/replay_data (NAME_dev_questions.jsonl,
// NAME_dev2_questions.jsonl, platform_messages_dev_questions.jsonl) were
// written in other words about facts no question set asks about; changes
// are made with them in view, unlike the held-out sets.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "services/compaction/recall/recall.h"
#include "services/tokenizer/tokens.h"
#include "storage/history_index.h"
#include "tools/replay_lib.h"

namespace convstate {
namespace {

// Turns before a question that its view shows verbatim, roughly.
constexpr int kRecentTurns = 8;

struct Question {
  std::string fact;
  int turn = 0;
  std::string text;
};

// The questions of a --questions file.
std::vector<Question> ReadQuestions(const std::string& path) {
  std::vector<Question> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    out.push_back({j.value("fact", ""), j.value("turn", 0), j.value("question", "")});
  }
  return out;
}

// The recall probes of a probes file: each asked fact, the user's message
// of its turn the question.
std::vector<Question> ProbeQuestions(const replay::Conversation& c) {
  std::vector<Question> out;
  for (const replay::Probe& p : c.probes) {
    if (p.kind != "recall") continue;
    std::string text;
    for (const replay::ReplayItem& r : c.items) {
      if (r.turn == p.turn && r.role == "user") {
        text = r.content;
        break;
      }
    }
    if (p.fact_ids.empty()) out.push_back({"", p.turn, text});
    for (const std::string& id : p.fact_ids) out.push_back({id, p.turn, text});
  }
  return out;
}

int Run(const std::string& data, const std::string& probes, const std::string& questions_path,
        bool verbose, const std::string& show) {
  const std::string dir = absl::StrCat(getenv("BUILD_WORKSPACE_DIRECTORY") != nullptr
                                           ? getenv("BUILD_WORKSPACE_DIRECTORY")
                                           : ".",
                                       "/tools/replay_data/");
  const std::string probes_path =
      !probes.empty() ? probes : questions_path.empty() ? dir + data + "_probes.jsonl" : "";
  auto loaded = replay::Load(dir + data + ".jsonl", dir + data + "_facts.jsonl", probes_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "recall_eval: %s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  const std::vector<Question> questions =
      questions_path.empty() ? ProbeQuestions(*loaded) : ReadQuestions(questions_path);
  std::vector<Item> items;
  for (const replay::ReplayItem& r : loaded->items) {
    items.push_back(replay::StoredItem(r, static_cast<int64_t>(items.size()) + 1));
  }
  const std::unique_ptr<Tokenizer> tokenizer = NewApproximateTokenizer();
  const int64_t rooms[] = {640, 1600};
  int asked = 0, found[2] = {0, 0}, unrelated = 0, unrelated_recalled = 0;
  int missed_unfound = 0, missed_ranked = 0;
  for (const Question& q : questions) {
    // --show asks about one question: the others are not ranked.
    if (!show.empty() && q.fact != show) continue;
    std::string text;
    int fact_turn = 0;
    for (const replay::Fact& f : loaded->facts) {
      if (f.id == q.fact) text = f.text, fact_turn = f.turn;
    }
    if (!q.fact.empty() && (text.empty() || fact_turn > q.turn - kRecentTurns)) continue;
    int64_t upto = 0;
    for (const Item& item : items) {
      if (item.turn_index <= q.turn - kRecentTurns) upto = item.sequence;
    }
    HistoryIndex index;
    for (int64_t s = 0; s < upto; ++s) index.Add(items[static_cast<size_t>(s)]);
    const RecallQuery query = ParseRecallQuery(q.text);
    HistorySearch search = SearchFor(query);
    search.max_items = kRecallCandidates;
    const HistoryHits hits = index.Search(search, upto, upto);
    if (!show.empty() && show == q.fact) {
      std::printf("terms:");
      for (const std::string& t : query.terms) std::printf(" %s", t.c_str());
      std::printf("\ncandidates, best first:");
      for (const Item& item : hits.found) std::printf(" #%lld", static_cast<long long>(item.sequence));
      std::printf("\n");
    }
    bool got[2] = {false, false};
    std::string section;  // The larger room's.
    for (int r = 0; r < 2; ++r) {
      RecallLimits limits;
      limits.max_tokens = rooms[r];
      const std::vector<RecalledPassage> passages = RankPassages(query, hits, *tokenizer, limits);
      section = RenderRecalled(passages);
      if (!show.empty() && show == q.fact && r == 1) {
        std::printf("passages, as ranked (score, item, first line):\n");
        for (const RecalledPassage& p : passages) {
          const std::string first = p.text.substr(0, std::min(p.text.find('\n'), size_t{100}));
          std::printf("  %.3f #%lld %s\n", p.score, static_cast<long long>(p.sequence),
                      first.c_str());
        }
      }
      const bool recalled = !section.empty() && absl::StrContains(section, "\n[#");
      got[r] = q.fact.empty() ? recalled : absl::StrContains(section, text);
      if (!show.empty() && show == q.fact && r == 1) std::printf("%s\n", section.c_str());
    }
    if (q.fact.empty()) {
      ++unrelated;
      unrelated_recalled += got[1];
      // With what it recalled: the words it matched on.
      if (verbose && got[1]) {
        std::printf("unrelated, recalled something | %s\n%s\n", q.text.c_str(), section.c_str());
      }
      continue;
    }
    ++asked;
    found[0] += got[0];
    found[1] += got[1];
    // A miss within 1,600 tokens: was the fact's item among the candidates?
    bool candidate = false;
    for (const Item& item : hits.found) candidate |= absl::StrContains(item.data.content, text);
    if (!got[1]) ++(candidate ? missed_ranked : missed_unfound);
    if (verbose && !(got[0] && got[1])) {
      std::printf("%s (turn %d): %s at 640, %s at 1600%s | %s\n", q.fact.c_str(), q.turn,
                  got[0] ? "found" : "missed", got[1] ? "found" : "missed",
                  candidate ? "" : ", not a candidate", q.text.c_str());
    }
  }
  std::printf("%s: %d of %d found within 640 tokens, %d within 1600; %d of %d unrelated "
              "questions recalled something\n",
              data.c_str(), found[0], asked, found[1], unrelated_recalled, unrelated);
  if (missed_unfound + missed_ranked > 0) {
    std::printf("  missed within 1600: %d not among the candidates, %d among them\n",
                missed_unfound, missed_ranked);
  }
  return 0;
}

}  // namespace
}  // namespace convstate

int main(int argc, char** argv) {
  std::string data = "platform", probes, questions, show;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (absl::StartsWith(a, "--data=")) {
      data = a.substr(7);
    } else if (absl::StartsWith(a, "--probes=")) {
      probes = a.substr(9);
    } else if (absl::StartsWith(a, "--questions=")) {
      questions = a.substr(12);
    } else if (absl::StartsWith(a, "--show=")) {
      show = a.substr(7);
    } else if (a == "--verbose") {
      verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: recall_eval [--data=NAME] [--probes=FILE | --questions=FILE] "
                   "[--verbose] [--show=FACT]\n");
      return 2;
    }
  }
  return convstate::Run(data, probes, questions, verbose, show);
}
