#pragma once
#include <memory>

namespace ttemu::host {
struct ProgramState;
}
namespace tt::tt_metal {
class Program {
public:
    Program();
    Program(Program&&) noexcept = default;
    Program& operator=(Program&&) noexcept = default;
    Program(const Program&) = delete;
    Program& operator=(const Program&) = delete;
    ~Program();
    ttemu::host::ProgramState& state() const { return *state_; }

private:
    std::shared_ptr<ttemu::host::ProgramState> state_;  // shared_ptr: works with the incomplete type
};
}  // namespace tt::tt_metal
