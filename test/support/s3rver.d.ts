/** The part of s3rver (which ships no types) the tests use. */
declare module "s3rver" {
  interface BucketConfig {
    name: string;
    configs: unknown[];
  }
  interface S3rverOptions {
    port?: number;
    address?: string;
    silent?: boolean;
    directory: string;
    configureBuckets?: BucketConfig[];
  }
  export default class S3rver {
    constructor(options: S3rverOptions);
    run(): Promise<{ address: string; port: number }>;
    close(): Promise<void>;
  }
}
