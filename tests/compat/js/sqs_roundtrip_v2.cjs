// The AWS SDK for JavaScript v2 (2.1400: the Query protocol, XML answers) against a
// Conveyor server: node sqs_roundtrip_v2.cjs URL PREFIX. Prints "ok <check>" per check that
// holds and "FAIL <check>" otherwise; exits 1 on a FAIL. The SDK checks body MD5s.
process.env.AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE = "1";
const AWS = require("aws-sdk");

const [endpoint, prefix = "jsv2"] = process.argv.slice(2);
const sqs = new AWS.SQS({ endpoint, region: "us-east-1", maxRetries: 0,
  credentials: new AWS.Credentials("test", "test") });
const arn = (name) => `arn:aws:sqs:us-east-1:000000000000:${name}`;

function check(holds, what) {
  console.log(`${holds ? "ok" : "FAIL"} ${what}`);
  if (!holds) process.exitCode = 1;
}

async function failure(call) {
  try { await call.promise(); return { code: "no error" }; } catch (e) { return e; }
}

(async () => {
  const dlqName = `${prefix}-dlq`;
  const dlq = (await sqs.createQueue({ QueueName: dlqName }).promise()).QueueUrl;
  const { QueueUrl } = await sqs.createQueue({ QueueName: `${prefix}-q`, tags: { team: "v2" },
    Attributes: { VisibilityTimeout: "1", RedrivePolicy: JSON.stringify(
      { deadLetterTargetArn: arn(dlqName), maxReceiveCount: 2 }) } }).promise();
  check(QueueUrl.endsWith(`/000000000000/${prefix}-q`), "CreateQueue returns the queue URL");

  const body = "héllo ☃ 𝄞 <&> \r\n";  // characters XML must escape
  const sent = await sqs.sendMessage({ QueueUrl, MessageBody: body, MessageAttributes: {
    s: { DataType: "String", StringValue: "x<y" },
    n: { DataType: "Number", StringValue: "-1.5e3" },
    b: { DataType: "Binary", BinaryValue: Buffer.from([0, 1, 255]) } } }).promise();
  check(Boolean(sent.MessageId && sent.MD5OfMessageAttributes), "SendMessage with attributes");

  const batch = await sqs.sendMessageBatch({ QueueUrl, Entries: [
    { Id: "1", MessageBody: "a" }, { Id: "2", MessageBody: "b" },
    { Id: "3", MessageBody: "c", DelaySeconds: 900000 }] }).promise();
  check(batch.Successful.length === 2 && batch.Failed[0]?.Code === "InvalidParameterValue",
    `SendMessageBatch reports the failed entry (${batch.Failed[0]?.Code})`);

  const got = await sqs.receiveMessage({ QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
    MessageAttributeNames: ["All"], AttributeNames: ["All"] }).promise();
  const first = got.Messages?.find((m) => m.MessageId === sent.MessageId);
  check(got.Messages?.length === 3, "ReceiveMessage returns the three messages");
  check(first?.Body === body && first.MessageAttributes.s.StringValue === "x<y"
    && Buffer.compare(first.MessageAttributes.b.BinaryValue, Buffer.from([0, 1, 255])) === 0
    && first.Attributes.ApproximateReceiveCount === "1",
    "body, attributes and system attributes round-trip through XML");

  await sqs.changeMessageVisibility({ QueueUrl, ReceiptHandle: first.ReceiptHandle,
    VisibilityTimeout: 0 }).promise();
  const deleted = await sqs.deleteMessageBatch({ QueueUrl, Entries: got.Messages
    .filter((m) => m !== first)
    .map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })) }).promise();
  check(deleted.Successful.length === 2, "DeleteMessageBatch");
  const again = await sqs.receiveMessage({ QueueUrl, WaitTimeSeconds: 2 }).promise();
  check(again.Messages?.[0]?.MessageId === sent.MessageId,
    "ChangeMessageVisibility 0 makes the message visible again");
  await sqs.deleteMessage({ QueueUrl, ReceiptHandle: again.Messages[0].ReceiptHandle }).promise();

  const attributes = (await sqs.getQueueAttributes({ QueueUrl, AttributeNames: ["All"] })
    .promise()).Attributes;
  check(attributes.QueueArn === arn(`${prefix}-q`) && attributes.VisibilityTimeout === "1",
    "GetQueueAttributes");
  check((await sqs.listQueueTags({ QueueUrl }).promise()).Tags?.team === "v2", "ListQueueTags");
  check((await sqs.listQueues({ QueueNamePrefix: `${prefix}-` }).promise()).QueueUrls?.length
    === 2, "ListQueues by prefix");
  check((await sqs.listDeadLetterSourceQueues({ QueueUrl: dlq }).promise()).queueUrls?.[0]
    === QueueUrl, "ListDeadLetterSourceQueues");

  // Errors carry the Query protocol's codes, as older SDKs know them.
  const missing = await failure(sqs.getQueueUrl({ QueueName: `${prefix}-none` }));
  check(missing.code === "AWS.SimpleQueueService.NonExistentQueue" && missing.statusCode === 400,
    `missing queue (${missing.code})`);
  const badValue = await failure(sqs.setQueueAttributes({ QueueUrl,
    Attributes: { VisibilityTimeout: "99999" } }));
  check(badValue.code === "InvalidAttributeValue", `InvalidAttributeValue (${badValue.code})`);
  const badHandle = await failure(sqs.deleteMessage({ QueueUrl, ReceiptHandle: "x" }));
  check(badHandle.code === "ReceiptHandleIsInvalid", `ReceiptHandleIsInvalid (${badHandle.code})`);

  await sqs.sendMessage({ QueueUrl, MessageBody: "poison" }).promise();
  for (let i = 0; i < 3; i++) {
    await sqs.receiveMessage({ QueueUrl, WaitTimeSeconds: 2, VisibilityTimeout: 0 }).promise();
  }
  const dead = await sqs.receiveMessage({ QueueUrl: dlq, WaitTimeSeconds: 2,
    VisibilityTimeout: 0 }).promise();
  check(dead.Messages?.[0]?.Body === "poison", "dead-lettered after maxReceiveCount");

  await sqs.purgeQueue({ QueueUrl }).promise();
  await sqs.deleteQueue({ QueueUrl }).promise();
  await sqs.deleteQueue({ QueueUrl: dlq }).promise();
  const gone = await failure(sqs.getQueueUrl({ QueueName: `${prefix}-q` }));
  check(gone.code === "AWS.SimpleQueueService.NonExistentQueue", "PurgeQueue and DeleteQueue");
})().catch((e) => { console.log(`FAIL unexpected error: ${e.code} ${e.message}`); process.exitCode = 1; });
