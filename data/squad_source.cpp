#include "data/squad_source.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "data/din_export.h"  // epoch_order
#include "tensor/check.h"

namespace aim::data {
namespace {

namespace fs = std::filesystem;

const char* const kFiles[] = {"train-v1.1.json", "dev-v1.1.json", "vocab.txt"};

std::string path_of(const std::string& dir, const char* name) {
  return (fs::path(dir) / name).string();
}

// Every file present (the error lists each missing one and what the directory holds), then the
// vocabulary, refused when the model's embedding has fewer rows.
WordPieceTokenizer load_vocab(const SquadSourceConfig& c) {
  AIM_CHECK(fs::is_directory(c.dir), "--data ", c.dir,
            ": not a directory (BERT's SQuAD task reads a directory with train-v1.1.json, "
            "dev-v1.1.json and vocab.txt, docs/bert.md)");
  std::string missing;
  for (const char* f : kFiles)
    if (!fs::is_regular_file(path_of(c.dir, f)))
      missing += std::string(missing.empty() ? "" : ", ") + f;
  AIM_CHECK(missing.empty(), "--data ", c.dir, ": no ", missing,
            " (BERT's SQuAD task reads a directory with train-v1.1.json and dev-v1.1.json, the "
            "SQuAD v1.1 files, and vocab.txt, BERT's uncased WordPiece vocabulary with one token "
            "per line: MODELS.md 3.1, docs/bert.md)");
  WordPieceTokenizer tok = WordPieceTokenizer::from_vocab_file(path_of(c.dir, "vocab.txt"), true);
  AIM_CHECK(c.model_vocab_size <= 0 || tok.size() <= c.model_vocab_size, "--data ", c.dir, ": ",
            path_of(c.dir, "vocab.txt"), " has ", tok.size(), " tokens but ", c.model,
            " embeds only ", c.model_vocab_size,
            " (BERT's uncased vocab.txt of 30522 tokens needs size=base or size=large)");
  for (const char* special : {"[CLS]", "[SEP]", "[PAD]"})
    AIM_CHECK(tok.id(special) >= 0, "--data ", c.dir, ": ", path_of(c.dir, "vocab.txt"), " has no ",
              special, " token (BERT's vocabulary has [PAD] [UNK] [CLS] [SEP])");
  AIM_CHECK(tok.id("[PAD]") == 0, "--data ", c.dir, ": ", path_of(c.dir, "vocab.txt"),
            " has [PAD] on line ", tok.id("[PAD]") + 1, ", BERT pads with id 0 (its first line)");
  return tok;
}

}  // namespace

SquadFileSource::SquadFileSource(SquadSourceConfig c) : c_(std::move(c)), tok_(load_vocab(c_)) {
  for (const char* f : kFiles)
    files_ += str(files_.empty() ? "" : ",", f, "=", fs::file_size(path_of(c_.dir, f)));

  // Training windows, a chunk of questions at a time so that only the compact form stays.
  const std::string train_path = path_of(c_.dir, "train-v1.1.json");
  std::vector<SquadExample> train = read_squad(train_path, true, &train_stats_);
  train_questions_ = int64_t(train.size());
  constexpr size_t kChunk = 256;
  for (size_t a = 0; a < train.size(); a += kChunk) {
    const std::vector<SquadExample> part(
        train.begin() + int64_t(a), train.begin() + int64_t(std::min(train.size(), a + kChunk)));
    for (const SquadFeature& f : squad_features(part, tok_, c_.features, true)) {
      Window w;
      const int64_t n = int64_t(f.tokens.size());
      w.ids.assign(f.input_ids.begin(), f.input_ids.begin() + n);
      w.query_tokens = int32_t(std::count(f.segment_ids.begin(), f.segment_ids.begin() + n, 0));
      w.start_position = int32_t(f.start_position);
      w.end_position = int32_t(f.end_position);
      train_.push_back(std::move(w));
    }
  }
  AIM_CHECK(!train_.empty(), "--data ", c_.dir, ": ", train_path, " gives no training windows (",
            train_stats_.questions, " questions, ", train_stats_.skipped,
            " skipped: answer not at its answer_start)");

  const std::string dev_path = path_of(c_.dir, "dev-v1.1.json");
  dev_ = read_squad(dev_path, false);
  dev_features_ = squad_features(dev_, tok_, c_.features, false);
  AIM_CHECK(!dev_features_.empty(), "--data ", c_.dir, ": ", dev_path,
            " gives no evaluation windows (", dev_.size(), " questions)");
}

std::string SquadFileSource::describe() const {
  std::ostringstream os;
  os << "squad " << c_.dir << " (" << train_questions_ << " training questions";
  if (train_stats_.skipped > 0)
    os << " (" << train_stats_.skipped << " skipped: answer text not at answer_start)";
  os << " -> " << train_.size() << " windows, " << dev_.size() << " dev questions -> "
     << dev_features_.size() << " windows; vocab " << tok_.size() << ", seq "
     << c_.features.max_seq_length << ", stride " << c_.features.doc_stride << ", query "
     << c_.features.max_query_length << ", shuffle seed " << c_.seed << ")";
  return os.str();
}

std::string SquadFileSource::fingerprint() const {
  std::ostringstream os;
  os << "squad-v1.1:" << files_ << ",train=" << train_.size() << ",dev=" << dev_features_.size()
     << ",seq=" << c_.features.max_seq_length << ",stride=" << c_.features.doc_stride
     << ",query=" << c_.features.max_query_length << ",seed=" << c_.seed;
  return os.str();
}

void SquadFileSource::seek(int64_t position) {
  AIM_CHECK(position >= 0, "squad ", c_.dir, ": negative stream position ", position);
  pos_ = position;
}

TensorMap SquadFileSource::next(int64_t batch_size) {
  const int64_t n = epoch_size(), T = c_.features.max_seq_length;
  AIM_CHECK(batch_size > 0 && batch_size <= n, "squad ", c_.dir, ": batch size ", batch_size,
            " must be in [1, ", n, "] (training windows)");
  const int64_t per_epoch = (n / batch_size) * batch_size;  // last partial batch skipped
  const int64_t epoch = pos_ / per_epoch, at = pos_ % per_epoch;
  AIM_CHECK(at % batch_size == 0, "squad ", c_.dir, ": stream position ", pos_,
            " is not a multiple of the batch size ", batch_size,
            " (resume with the batch size of the checkpoint)");
  if (epoch != order_epoch_) {
    order_ = epoch_order(n, c_.seed, epoch);
    order_epoch_ = epoch;
  }
  // Rows padded with [PAD] (0), token type 0, mask 0.
  Tensor ids = Tensor::empty({batch_size, T}, DType::i64),
         types = Tensor::empty({batch_size, T}, DType::i64),
         mask = Tensor::empty({batch_size, T}, DType::i64),
         start = Tensor::empty({batch_size}, DType::i64),
         end = Tensor::empty({batch_size}, DType::i64);
  for (Tensor* t : {&ids, &types, &mask})
    std::fill(t->data<int64_t>(), t->data<int64_t>() + batch_size * T, int64_t(0));
  for (int64_t b = 0; b < batch_size; ++b) {
    const Window& w = train_[size_t(order_[size_t(at + b)])];
    int64_t* id = ids.data<int64_t>() + b * T;
    int64_t* ty = types.data<int64_t>() + b * T;
    int64_t* ma = mask.data<int64_t>() + b * T;
    for (size_t i = 0; i < w.ids.size(); ++i) {
      id[i] = w.ids[i];
      ty[i] = int64_t(i) >= w.query_tokens;
      ma[i] = 1;
    }
    start.data<int64_t>()[b] = w.start_position;
    end.data<int64_t>()[b] = w.end_position;
  }
  pos_ += batch_size;
  return {{"input_ids", ids},
          {"token_type_ids", types},
          {"attention_mask", mask},
          {"start_positions", start},
          {"end_positions", end}};
}

TensorMap SquadFileSource::eval_batch(int64_t start, int64_t count) const {
  AIM_CHECK(start >= 0 && count > 0 && start + count <= eval_size(), "squad ", c_.dir,
            ": evaluation windows [", start, ", ", start + count, ") outside [0, ", eval_size(),
            ")");
  const int64_t T = c_.features.max_seq_length;
  Tensor ids = Tensor::empty({count, T}, DType::i64), types = Tensor::empty({count, T}, DType::i64),
         mask = Tensor::empty({count, T}, DType::i64);
  for (int64_t b = 0; b < count; ++b) {
    const SquadFeature& f = dev_features_[size_t(start + b)];
    std::copy(f.input_ids.begin(), f.input_ids.end(), ids.data<int64_t>() + b * T);
    std::copy(f.segment_ids.begin(), f.segment_ids.end(), types.data<int64_t>() + b * T);
    std::copy(f.input_mask.begin(), f.input_mask.end(), mask.data<int64_t>() + b * T);
  }
  return {{"input_ids", ids}, {"token_type_ids", types}, {"attention_mask", mask}};
}

}  // namespace aim::data
