# kernel<<<config>>>(args) -> ::emu::Launch([=](auto&... a) { kernel(a...); }, "kernel", config)(args):
# the call inside the lambda deduces template arguments as a launch does; [=] copies a kernel
# held in a variable (a graph may replay the launch later). One launch per line
# (`<<<` and `>>>(` on one line; CMake fails the build if any is left).
/^[[:space:]]*\/\//b
s/^([[:space:]]*)([^[:space:]].*)<<<(.*)>>>\(/\1::emu::Launch([=](auto\&... a) { \2(a...); }, "\2", \3)(/
