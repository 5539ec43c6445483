// The AWS SDK for JavaScript v3 (JSON protocol) against a Conveyor server:
// node sqs_roundtrip.mjs URL PREFIX.
// Prints "ok <check>" per check that holds and "FAIL <check>" otherwise; exits 1 on a FAIL.
import {
  SQSClient, CreateQueueCommand, SendMessageCommand, SendMessageBatchCommand,
  ReceiveMessageCommand, DeleteMessageCommand, DeleteMessageBatchCommand,
  ChangeMessageVisibilityCommand, GetQueueAttributesCommand, SetQueueAttributesCommand,
  GetQueueUrlCommand, ListQueuesCommand, ListQueueTagsCommand, PurgeQueueCommand,
  DeleteQueueCommand, ListDeadLetterSourceQueuesCommand, StartMessageMoveTaskCommand,
  ListMessageMoveTasksCommand, QueueDoesNotExist,
} from "@aws-sdk/client-sqs";

const endpoint = process.argv[2];
const prefix = process.argv[3] ?? "js";
const sqs = new SQSClient({ endpoint, region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" } });
const account = "000000000000";
const arn = (name) => `arn:aws:sqs:us-east-1:${account}:${name}`;

function check(holds, what) {
  console.log(`${holds ? "ok" : "FAIL"} ${what}`);
  if (!holds) process.exitCode = 1;
}

async function errorName(command) {
  try { await sqs.send(command); return "no error"; } catch (e) { return e; }
}

const dlqName = `${prefix}-dlq`;
const dlq = (await sqs.send(new CreateQueueCommand({ QueueName: dlqName }))).QueueUrl;
const { QueueUrl } = await sqs.send(new CreateQueueCommand({
  QueueName: `${prefix}-q`, tags: { team: "js" }, Attributes: {
    VisibilityTimeout: "1",
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: arn(dlqName), maxReceiveCount: 2 }) } }));
check(QueueUrl.endsWith(`/${account}/${prefix}-q`), "CreateQueue returns the queue URL");

// The SDK checks the body MD5 of every send, batch entry and received message, and
// throws on a mismatch (it does not check the attributes' MD5s: botocore's tests do).
const body = "héllo ☃ 𝄞";
const sent = await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: body,
  MessageAttributes: {
    s: { DataType: "String", StringValue: "x" },
    n: { DataType: "Number", StringValue: "1.5" },
    b: { DataType: "Binary", BinaryValue: new Uint8Array([0, 1, 255]) },
    c: { DataType: "String.custom", StringValue: "y" } },
  MessageSystemAttributes: { AWSTraceHeader: { DataType: "String", StringValue: "Root=1-a" } } }));
check(Boolean(sent.MD5OfMessageAttributes && sent.MD5OfMessageSystemAttributes),
  "SendMessage with every attribute type");

const batch = await sqs.send(new SendMessageBatchCommand({ QueueUrl, Entries: [
  { Id: "1", MessageBody: "a" }, { Id: "2", MessageBody: "b" }, { Id: "3", MessageBody: "" }] }));
// An empty body fails its entry with EmptyValue, as SQS answers (the Ballerina connector's
// tests against SQS, testSendMessageBatchPartialFailure).
check(batch.Successful.length === 2 && batch.Failed[0]?.Code === "EmptyValue",
  "SendMessageBatch reports the failed entry");

const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10,
  WaitTimeSeconds: 2, MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"] }));
const first = got.Messages?.find((m) => m.MessageId === sent.MessageId);
check(got.Messages?.length === 3, "ReceiveMessage returns the three messages");
check(first?.Body === body && first.MessageAttributes.b.BinaryValue.length === 3
  && first.Attributes.AWSTraceHeader === "Root=1-a"
  && first.Attributes.ApproximateReceiveCount === "1",
  "body, binary attribute and system attributes round-trip");

await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl, ReceiptHandle: first.ReceiptHandle,
  VisibilityTimeout: 0 }));
const deleted = await sqs.send(new DeleteMessageBatchCommand({ QueueUrl, Entries: got.Messages
  .filter((m) => m !== first).map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })) }));
check(deleted.Successful.length === 2, "DeleteMessageBatch");
const again = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 2 }));
check(again.Messages?.[0]?.MessageId === sent.MessageId,
  "ChangeMessageVisibility 0 makes the message visible again");
await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: again.Messages[0].ReceiptHandle }));

const attributes = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl,
  AttributeNames: ["All"] }))).Attributes;
check(attributes.QueueArn === arn(`${prefix}-q`) && attributes.ApproximateNumberOfMessages === "0",
  "GetQueueAttributes");
check((await sqs.send(new ListQueueTagsCommand({ QueueUrl }))).Tags?.team === "js", "ListQueueTags");
check((await sqs.send(new ListQueuesCommand({ QueueNamePrefix: `${prefix}-` }))).QueueUrls?.length
  === 2, "ListQueues by prefix");
check((await sqs.send(new ListDeadLetterSourceQueuesCommand({ QueueUrl: dlq }))).queueUrls?.[0]
  === QueueUrl, "ListDeadLetterSourceQueues");

// Errors arrive as the SDK's own typed exceptions.
const missing = await errorName(new GetQueueUrlCommand({ QueueName: `${prefix}-none` }));
check(missing instanceof QueueDoesNotExist && missing.$metadata.httpStatusCode === 400,
  "QueueDoesNotExist is the SDK's typed error");
const badValue = await errorName(new SetQueueAttributesCommand({ QueueUrl,
  Attributes: { VisibilityTimeout: "99999" } }));
check(badValue.name === "InvalidAttributeValue", `InvalidAttributeValue (${badValue.name})`);
const badHandle = await errorName(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: "x" }));
check(badHandle.name === "ReceiptHandleIsInvalid", `ReceiptHandleIsInvalid (${badHandle.name})`);

// Dead letters, and a move task that takes them back.
await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: "poison" }));
for (let i = 0; i < 3; i++) {
  await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 2, VisibilityTimeout: 0 }));
}
const dead = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq, WaitTimeSeconds: 2,
  VisibilityTimeout: 0 }));
check(dead.Messages?.[0]?.Body === "poison", "dead-lettered after maxReceiveCount");
await sqs.send(new StartMessageMoveTaskCommand({ SourceArn: arn(dlqName) }));
const back = await sqs.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 10 }));
check(back.Messages?.[0]?.Body === "poison", "StartMessageMoveTask moves it back");
let status;  // the task finishes on its own, shortly after its last move
for (let i = 0; i < 50 && status !== "COMPLETED"; i++) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  const tasks = await sqs.send(new ListMessageMoveTasksCommand({ SourceArn: arn(dlqName) }));
  status = tasks.Results?.[0]?.Status;
}
check(status === "COMPLETED", `ListMessageMoveTasks shows the task COMPLETED (${status})`);

await sqs.send(new PurgeQueueCommand({ QueueUrl }));
await sqs.send(new DeleteQueueCommand({ QueueUrl }));
await sqs.send(new DeleteQueueCommand({ QueueUrl: dlq }));
const gone = await errorName(new GetQueueUrlCommand({ QueueName: `${prefix}-q` }));
check(gone instanceof QueueDoesNotExist, "PurgeQueue and DeleteQueue");
