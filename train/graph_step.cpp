#include "train/graph_step.h"

#include <algorithm>
#include <chrono>

#include "tensor/allocator.h"
#include "tensor/check.h"

namespace aim::train {

// The captured step, its private stream and its input tensors.
struct GraphStep::Captured {
  StreamHandle stream = nullptr;
  GraphHandle graph = nullptr;
  TensorMap inputs;  // each batch is copied here before a replay
  Tensor loss;       // [1] f32, written by every replay
  ~Captured() {
    if (graph) destroy_graph(graph);
  }
};

GraphStep::GraphStep(StepContext& ctx, Device dev, std::string name, std::ostream& log)
    : ctx_(ctx), dev_(dev), name_(std::move(name)), log_(log) {
  AIM_CHECK(dev.is_cuda(), "--cuda-graph needs a CUDA device (--device cuda), got ", dev.str());
  AIM_CHECK(!ctx.comm,
            "--cuda-graph: one device only (the data-parallel step's collectives are not "
            "captured)");
  AIM_CHECK(!ctx.scaler,
            "--cuda-graph: not with --precision fp16 (the dynamic loss scale decides on the host "
            "whether the optimizer steps); fp32 and bf16 steps are capturable");
  AIM_CHECK(ctx.inject_overflow_at.empty(), "--cuda-graph: not with --inject-overflow");
}

GraphStep::~GraphStep() = default;

const Tensor& GraphStep::loss() const {
  AIM_CHECK(captured_, "--cuda-graph: no step captured yet");
  return captured_->loss;
}

const TensorMap& GraphStep::run(const TensorMap& host_batch, int64_t step_number) {
  // The captured shapes: the model's padded shapes, grown when a batch exceeds them (then the
  // step is captured again).
  std::map<std::string, Shape> want;
  for (const auto& [k, t] : host_batch) {
    Shape sh = ctx_.model->padded_shape(k, t.sizes());
    auto it = shapes_.find(k);
    if (captured_ && it != shapes_.end() && it->second.size() == sh.size())
      for (size_t i = 0; i < sh.size(); ++i) sh[i] = std::max(sh[i], it->second[i]);
    want[k] = sh;
  }
  TensorMap padded = ctx_.model->pad_batch(host_batch, want);
  for (auto& [k, t] : padded) t = t.pin_memory();  // pinned already unless padded here
  if (!captured_ || want != shapes_) {
    if (captured_)
      log_ << "cuda graph: the batch of step " << step_number
           << " exceeds the captured shapes: the step is captured again\n";
    captured_.reset();
    const auto t0 = std::chrono::steady_clock::now();
    capture(padded, step_number);
    capture_ms_ +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++captures_;
    shapes_ = want;
  }
  replay(padded, step_number);
  return captured_->inputs;
}

void GraphStep::capture(const TensorMap& host_batch, int64_t step_number) {
  models::Model& model = *ctx_.model;
  std::string meta_keys;
  for (const auto& [k, t] : model.host_metadata(host_batch))
    meta_keys += (meta_keys.empty() ? "" : ", ") + k;
  AIM_CHECK(meta_keys.empty(), "--cuda-graph: ", name_,
            "'s step reads host metadata of each batch (", meta_keys,
            "): a captured step would keep the first batch's; this model's training step is "
            "not capturable");
  auto c = std::make_unique<Captured>();
  // After an eager step: the gradients and the optimizer state exist, so the capture allocates
  // none of them and the capturable set of parameters is known.
  if (!capturable_optimizer_) ctx_.optim->set_capturable();
  capturable_optimizer_ = true;
  c->inputs = models::batch_to_device(model, host_batch, dev_);
  const int d = dev_.index;
  const StreamHandle eager = current_stream(d);
  c->stream = create_stream(d);
  stream_wait(d, c->stream, eager);
  set_current_stream(d, c->stream);
  const int64_t uploads0 = captured_uploads();
  begin_capture(d, c->stream);
  try {
    ctx_.optim->zero_grad();
    StepHooks hooks;
    Captured* cp = c.get();
    hooks.record_loss = [cp](const Tensor& loss) { cp->loss = loss; };
    train_step(ctx_, c->inputs, step_number, hooks);
    c->graph = end_capture(d, c->stream);
  } catch (const Error& e) {
    if (!c->graph) try {
        end_capture(d, c->stream);
      } catch (...) {
      }
    set_current_stream(d, eager);
    AIM_FAIL("--cuda-graph: capturing ", name_, "'s training step failed: ", e.what());
  }
  set_current_stream(d, eager);
  const int64_t uploads = captured_uploads() - uploads0;
  AIM_CHECK(uploads == 0, "--cuda-graph: ", name_, "'s training step uploaded host data ", uploads,
            " time(s) while it was captured (a plan made on the host, e.g. lengths or offsets "
            "from the batch): replays would reuse the captured values; this model's training "
            "step is not capturable");
  std::string shapes;
  for (const auto& [k, t] : c->inputs)
    shapes += str(shapes.empty() ? "" : ", ", k, " ", to_string(t.sizes()));
  log_ << "cuda graph: training step captured at step " << step_number << " (" << shapes
       << ") and replayed from then on (capturable optimizer: lr and step count on the device)\n";
  captured_ = std::move(c);
}

void GraphStep::replay(const TensorMap& host_batch, int64_t step_number) {
  Captured& c = *captured_;
  for (const auto& [k, t] : c.inputs) {
    auto h = host_batch.find(k);
    AIM_CHECK(h != host_batch.end(), "--cuda-graph: the batch of step ", step_number, " has no ",
              k);
    AIM_CHECK(h->second.sizes() == t.sizes() && h->second.dtype() == t.dtype(),
              "--cuda-graph: the batch of step ", step_number, " has ", k, " ",
              to_string(h->second.sizes()), " ", dtype_name(h->second.dtype()),
              ", the captured step ", to_string(t.sizes()), " ", dtype_name(t.dtype()),
              " (a captured step needs batches of one shape)");
    t.copy_(h->second);
  }
  const int d = dev_.index;
  const StreamHandle eager = current_stream(d);
  stream_wait(d, c.stream, eager);
  launch_graph(c.graph, c.stream);
  stream_wait(d, eager, c.stream);
}

}  // namespace aim::train
