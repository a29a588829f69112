// Ends what loaders/x86_target_push.h began: the code after it is baseline code again.
#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
