// Every server a test starts (by the helper or by its own spawn, which passes process.env on)
// takes a free port for its S3 listener: the default, 9000, would collide between parallel tests.
process.env.SVC_S3_API_PORT ??= '0';
