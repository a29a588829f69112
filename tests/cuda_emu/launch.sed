# kernel<<<config>>>(args) -> ::emu::Launch([](auto&... a) { kernel(a...); }, "kernel", config)(args):
# the call inside the lambda deduces template arguments as a launch does. One launch per line
# (`<<<` and `>>>(` on one line; CMake fails the build if any is left).
s/^([[:space:]]*)([^[:space:]].*)<<<(.*)>>>\(/\1::emu::Launch([](auto\&... a) { \2(a...); }, "\2", \3)(/
