// RUN: xfuse-opt %s -p ew-optimize | filecheck %s
// RUN: xfuse-opt %s -p 'ew-optimize{unsafe-math=true}' | filecheck %s --check-prefix=UNSAFE

// Constants fold, in the element type.
// CHECK-LABEL: func.func @fold
// CHECK-NEXT:    %[[C:.*]] = ew.constant 3.0 : tensor<f32>
// CHECK-NEXT:    %[[S:.*]] = ew.add %{{.*}}, %[[C]] : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
// CHECK-NEXT:    func.return %[[S]]
func.func @fold(%x: tensor<?xf32>) -> tensor<?xf32> {
  %a = ew.constant 1.0 : tensor<f32>
  %b = ew.constant 2.0 : tensor<f32>
  %c = ew.add %a, %b : tensor<f32>
  %s = ew.add %x, %c : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %s : tensor<?xf32>
}

// The IEEE-exact identities disappear: x + (-0.0), (-0.0) + x, x - (+0.0), x*1, 1*x, x/1, --x.
// CHECK-LABEL: func.func @identities
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>)
// CHECK-NEXT:    func.return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %one = ew.constant 1.0 : tensor<f32>
  %zero = ew.constant 0.0 : tensor<f32>
  %minus_zero = ew.constant -0.0 : tensor<f32>
  %a = ew.mul %x, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %b = ew.mul %one, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %c = ew.add %x, %minus_zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %d = ew.sub %x, %zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %e = ew.div %x, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %n = ew.neg %x : tensor<?xf32>
  %f = ew.neg %n : tensor<?xf32>
  %g = ew.add %minus_zero, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  func.return %a, %b, %c, %d, %e, %f, %g : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}

// A select of a constant condition is the arm it picks (a NaN condition is true, -0 false), and
// one of two equal arms is that arm; a select whose arm would lose a broadcast stays.
// CHECK-LABEL: func.func @select_of_a_known_arm
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<?xf32>, %[[C:.*]]: tensor<?xf32>)
// CHECK-NEXT:    %[[ONE:.*]] = ew.constant 1.0 : tensor<f32>
// CHECK-NEXT:    %[[KEPT:.*]] = ew.select %[[C]], %[[ONE]], %[[X]] : tensor<?xf32>, tensor<f32>, tensor<?xf32> -> tensor<?xf32>
// CHECK-NEXT:    %[[BROADCAST:.*]] = ew.select %[[C]], %[[ONE]], %[[ONE]] : tensor<?xf32>, tensor<f32>, tensor<f32> -> tensor<?xf32>
// CHECK-NEXT:    func.return %[[X]], %[[Y]], %[[X]], %[[Y]], %[[KEPT]], %[[BROADCAST]]
func.func @select_of_a_known_arm(%x: tensor<?xf32>, %y: tensor<?xf32>, %c: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %nan = ew.constant nan : tensor<f32>
  %minus_zero = ew.constant -0.0 : tensor<f32>
  %one = ew.constant 1.0 : tensor<f32>
  %a = ew.select %nan, %x, %y : tensor<f32>, tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  %b = ew.select %minus_zero, %x, %y : tensor<f32>, tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  %d = ew.select %c, %x, %x : tensor<?xf32>
  %e = ew.select %one, %y, %x : tensor<f32>, tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  %f = ew.select %c, %one, %x : tensor<?xf32>, tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %g = ew.select %c, %one, %one : tensor<?xf32>, tensor<f32>, tensor<f32> -> tensor<?xf32>
  func.return %a, %b, %d, %e, %f, %g : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}

// Leaky ReLU, select(x > 0, x, c * x) with 0 < c < 1 (c * x or x * c, 0 of either sign),
// compares its arms instead: select(x > c * x, x, c * x), the same bits for every x, and one x86
// `maxps`. Kept: a compare with another constant, of another value, an arm that is not x, a
// product of another value, a slope of 1.5 or -0.5.
// CHECK-LABEL: func.func @leaky_relu
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<?xf32>)
// CHECK-DAG:     %[[ZERO:.*]] = ew.constant 0.0 : tensor<f32>
// CHECK-DAG:     %[[ONE:.*]] = ew.constant 1.0 : tensor<f32>
// CHECK-DAG:     %[[SMALL:.*]] = ew.constant 0.01 : tensor<f32>
// CHECK:         %[[X_POSITIVE:.*]] = ew.gt %[[X]], %[[ZERO]]
// CHECK-NEXT:    %[[SCALED:.*]] = ew.mul %[[SMALL]], %[[X]]
// CHECK-NEXT:    %[[ARMS:.*]] = ew.gt %[[X]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[LEAKY:.*]] = ew.select %[[ARMS]], %[[X]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[FLIPPED:.*]] = ew.mul %[[X]], %[[SMALL]]
// CHECK-NEXT:    %[[ARMS_FLIPPED:.*]] = ew.gt %[[X]], %[[FLIPPED]] : tensor<?xf32>
// CHECK-NEXT:    %[[LEAKY_FLIPPED:.*]] = ew.select %[[ARMS_FLIPPED]], %[[X]], %[[FLIPPED]] : tensor<?xf32>
// CHECK-NEXT:    %[[WITH_ONE:.*]] = ew.gt %[[X]], %[[ONE]]
// CHECK-NEXT:    %[[KEPT_ONE:.*]] = ew.select %[[WITH_ONE]], %[[X]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[Y_POSITIVE:.*]] = ew.gt %[[Y]], %[[ZERO]]
// CHECK-NEXT:    %[[KEPT_Y:.*]] = ew.select %[[Y_POSITIVE]], %[[X]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[KEPT_ARM:.*]] = ew.select %[[X_POSITIVE]], %[[Y]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[OTHER:.*]] = ew.mul %[[SMALL]], %[[Y]]
// CHECK-NEXT:    %[[KEPT_OTHER:.*]] = ew.select %[[X_POSITIVE]], %[[X]], %[[OTHER]] : tensor<?xf32>
// CHECK-NEXT:    %[[STEEP:.*]] = ew.mul %{{.*}}, %[[X]]
// CHECK-NEXT:    %[[KEPT_STEEP:.*]] = ew.select %[[X_POSITIVE]], %[[X]], %[[STEEP]] : tensor<?xf32>
// CHECK-NEXT:    %[[NEGATIVE:.*]] = ew.mul %{{.*}}, %[[X]]
// CHECK-NEXT:    %[[KEPT_NEGATIVE:.*]] = ew.select %[[X_POSITIVE]], %[[X]], %[[NEGATIVE]] : tensor<?xf32>
// CHECK-NEXT:    func.return %[[LEAKY]], %[[LEAKY_FLIPPED]], %[[KEPT_ONE]], %[[KEPT_Y]], %[[KEPT_ARM]], %[[KEPT_OTHER]], %[[KEPT_STEEP]], %[[KEPT_NEGATIVE]]
func.func @leaky_relu(%x: tensor<?xf32>, %y: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %zero = ew.constant 0.0 : tensor<f32>
  %minus_zero = ew.constant -0.0 : tensor<f32>
  %one = ew.constant 1.0 : tensor<f32>
  %small = ew.constant 0.01 : tensor<f32>
  %steep = ew.constant 1.5 : tensor<f32>
  %negative = ew.constant -0.5 : tensor<f32>
  %positive = ew.gt %x, %zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %scaled = ew.mul %small, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %a = ew.select %positive, %x, %scaled : tensor<?xf32>
  %not_negative_zero = ew.gt %x, %minus_zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %flipped = ew.mul %x, %small : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %b = ew.select %not_negative_zero, %x, %flipped : tensor<?xf32>
  %above_one = ew.gt %x, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %c = ew.select %above_one, %x, %scaled : tensor<?xf32>
  %y_positive = ew.gt %y, %zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %d = ew.select %y_positive, %x, %scaled : tensor<?xf32>
  %e = ew.select %positive, %y, %scaled : tensor<?xf32>
  %other = ew.mul %small, %y : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %f = ew.select %positive, %x, %other : tensor<?xf32>
  %steeply = ew.mul %steep, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %g = ew.select %positive, %x, %steeply : tensor<?xf32>
  %negatively = ew.mul %negative, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %h = ew.select %positive, %x, %negatively : tensor<?xf32>
  func.return %a, %b, %c, %d, %e, %f, %g, %h : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}

// Where the compare with 0 broadcasts x, the select keeps its shape.
// CHECK-LABEL: func.func @leaky_relu_broadcast
// CHECK-SAME:    (%[[X:.*]]: tensor<f32>)
// CHECK:         %[[SCALED:.*]] = ew.mul %{{.*}}, %[[X]] : tensor<f32>
// CHECK-NEXT:    %[[ARMS:.*]] = ew.gt %[[X]], %[[SCALED]] : tensor<f32>
// CHECK-NEXT:    %[[LEAKY:.*]] = ew.select %[[ARMS]], %[[X]], %[[SCALED]] : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<4xf32>
// CHECK-NEXT:    func.return %[[LEAKY]]
func.func @leaky_relu_broadcast(%x: tensor<f32>) -> tensor<4xf32> {
  %zero = ew.constant 0.0 : tensor<4xf32>
  %half = ew.constant 0.5 : tensor<f32>
  %positive = ew.gt %x, %zero : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %scaled = ew.mul %half, %x : tensor<f32>
  %leaky = ew.select %positive, %x, %scaled : tensor<4xf32>, tensor<f32>, tensor<f32> -> tensor<4xf32>
  func.return %leaky : tensor<4xf32>
}

// max(x, c * x) and min(c * x, x) with c > 0 (leaky ReLU as numpy's users write it): a compare
// of the two and a select, the same numbers (one x86 maxps, where a NaN-propagating max is six
// ops). A negative c, or another array scaled, keeps the max.
// CHECK-LABEL: func.func @extremum_of_scaled_operands
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<?xf32>)
// CHECK:         %[[SCALED:.*]] = ew.mul %{{.*}}, %[[X]]
// CHECK-NEXT:    %[[GREATER:.*]] = ew.gt %[[X]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[LEAKY:.*]] = ew.select %[[GREATER]], %[[X]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[LESS:.*]] = ew.lt %[[X]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[LOWER:.*]] = ew.select %[[LESS]], %[[X]], %[[SCALED]] : tensor<?xf32>
// CHECK-NEXT:    %[[NEGATIVELY:.*]] = ew.mul %[[X]], %{{.*}}
// CHECK-NEXT:    %[[KEPT_NEGATIVE:.*]] = ew.max %[[X]], %[[NEGATIVELY]] : tensor<?xf32>
// CHECK-NEXT:    %[[OTHER:.*]] = ew.mul %{{.*}}, %[[Y]]
// CHECK-NEXT:    %[[KEPT_OTHER:.*]] = ew.max %[[X]], %[[OTHER]] : tensor<?xf32>
// CHECK-NEXT:    func.return %[[LEAKY]], %[[LOWER]], %[[KEPT_NEGATIVE]], %[[KEPT_OTHER]]
func.func @extremum_of_scaled_operands(%x: tensor<?xf32>, %y: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %small = ew.constant 0.01 : tensor<f32>
  %negative = ew.constant -0.5 : tensor<f32>
  %scaled = ew.mul %small, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %leaky = ew.max %x, %scaled : tensor<?xf32>
  %lower = ew.min %scaled, %x : tensor<?xf32>
  %negatively = ew.mul %x, %negative : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %kept_negative = ew.max %x, %negatively : tensor<?xf32>
  %other = ew.mul %small, %y : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %kept_other = ew.max %x, %other : tensor<?xf32>
  func.return %leaky, %lower, %kept_negative, %kept_other : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}

// x + (+0.0), (+0.0) + x and x - (-0.0) turn x = -0.0 into +0.0: kept unless unsafe-math (nsz).
// CHECK-LABEL: func.func @signed_zeros
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf32>)
// CHECK-DAG:     %[[ZERO:.*]] = ew.constant 0.0 : tensor<f32>
// CHECK-DAG:     %[[MINUS_ZERO:.*]] = ew.constant -0.0 : tensor<f32>
// CHECK:         %[[A:.*]] = ew.add %[[X]], %[[ZERO]]
// CHECK-NEXT:    %[[B:.*]] = ew.add %[[ZERO]], %[[X]]
// CHECK-NEXT:    %[[C:.*]] = ew.sub %[[X]], %[[MINUS_ZERO]]
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[C]]
// UNSAFE-LABEL: func.func @signed_zeros
// UNSAFE-SAME:    (%[[X:.*]]: tensor<?xf32>)
// UNSAFE-NEXT:    func.return %[[X]], %[[X]], %[[X]]
func.func @signed_zeros(%x: tensor<?xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %zero = ew.constant 0.0 : tensor<f32>
  %minus_zero = ew.constant -0.0 : tensor<f32>
  %a = ew.add %x, %zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %b = ew.add %zero, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %c = ew.sub %x, %minus_zero : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %a, %b, %c : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
}

// x*0 is not IEEE-safe (inf*0 is NaN): kept unless unsafe-math; CSE shares the repeated tanh.
// CHECK-LABEL: func.func @unsafe
// CHECK:         ew.mul
// CHECK:         %[[T:.*]] = ew.tanh
// CHECK-NEXT:    %[[S:.*]] = ew.add %[[T]], %[[T]]
// UNSAFE-LABEL: func.func @unsafe
// UNSAFE-NOT:    ew.mul
// UNSAFE:        %[[Z:.*]] = ew.constant 0.0 : tensor<4xf32>
// UNSAFE:        func.return %[[Z]],
func.func @unsafe(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = ew.constant 0.0 : tensor<f32>
  %m = ew.mul %x, %zero : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %t1 = ew.tanh %x : tensor<4xf32>
  %t2 = ew.tanh %x : tensor<4xf32>
  %s = ew.add %t1, %t2 : tensor<4xf32>
  func.return %m, %s : tensor<4xf32>, tensor<4xf32>
}

// Folding computes in f64 and rounds to the element type.
// CHECK-LABEL: func.func @fold_rounds_to_the_element_type
// CHECK-NEXT:    %[[A:.*]] = ew.constant 0.333251953125 : tensor<f16>
// CHECK-NEXT:    %[[B:.*]] = ew.constant 0.333984375 : tensor<bf16>
// CHECK-NEXT:    %[[C:.*]] = ew.constant 0.3333333432674408 : tensor<f32>
// CHECK-NEXT:    %[[D:.*]] = ew.constant 0.3333333333333333 : tensor<f64>
// CHECK-NEXT:    %[[E:.*]] = ew.constant 2.7182817459106445 : tensor<f32>
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[C]], %[[D]], %[[E]]
func.func @fold_rounds_to_the_element_type() -> (tensor<f16>, tensor<bf16>, tensor<f32>, tensor<f64>, tensor<f32>) {
  %one16 = ew.constant 1.0 : tensor<f16>
  %three16 = ew.constant 3.0 : tensor<f16>
  %a = ew.div %one16, %three16 : tensor<f16>
  %oneb = ew.constant 1.0 : tensor<bf16>
  %threeb = ew.constant 3.0 : tensor<bf16>
  %b = ew.div %oneb, %threeb : tensor<bf16>
  %one32 = ew.constant 1.0 : tensor<f32>
  %three32 = ew.constant 3.0 : tensor<f32>
  %c = ew.div %one32, %three32 : tensor<f32>
  %one64 = ew.constant 1.0 : tensor<f64>
  %three64 = ew.constant 3.0 : tensor<f64>
  %d = ew.div %one64, %three64 : tensor<f64>
  %e = ew.exp %one32 : tensor<f32>
  func.return %a, %b, %c, %d, %e : tensor<f16>, tensor<bf16>, tensor<f32>, tensor<f64>, tensor<f32>
}

// Every op folds; IEEE special values fold too (1/0 = inf, 0/0 = NaN, log(-1) = NaN), and
// 70000 overflows f16.
// CHECK-LABEL: func.func @fold_every_op
// CHECK-NEXT:    %[[V5:.*]] = ew.constant 5.0 : tensor<f32>
// CHECK-NEXT:    %[[V1:.*]] = ew.constant 1.0 : tensor<f32>
// CHECK-NEXT:    %[[V6:.*]] = ew.constant 6.0 : tensor<f32>
// CHECK-NEXT:    %[[V15:.*]] = ew.constant 1.5 : tensor<f32>
// CHECK-NEXT:    %[[V3:.*]] = ew.constant 3.0 : tensor<f32>
// CHECK-NEXT:    %[[V2:.*]] = ew.constant 2.0 : tensor<f32>
// CHECK-NEXT:    %[[V9:.*]] = ew.constant 9.0 : tensor<f32>
// CHECK-NEXT:    %[[VM3:.*]] = ew.constant -3.0 : tensor<f32>
// CHECK-NEXT:    %[[E3:.*]] = ew.constant 20.08553695678711 : tensor<f32>
// CHECK-NEXT:    %[[L3:.*]] = ew.constant 1.0986123085021973 : tensor<f32>
// CHECK-NEXT:    %[[T3:.*]] = ew.constant 0.9950547814369202 : tensor<f32>
// CHECK-NEXT:    %[[S3:.*]] = ew.constant 0.9525741338729858 : tensor<f32>
// CHECK-NEXT:    %[[F3:.*]] = ew.constant 0.9999778866767883 : tensor<f32>
// CHECK-NEXT:    %[[Q3:.*]] = ew.constant 1.7320507764816284 : tensor<f32>
// CHECK-NEXT:    %[[R3:.*]] = ew.constant 0.5773502588272095 : tensor<f32>
// CHECK-NEXT:    %[[Z:.*]] = ew.constant 0.0 : tensor<f32>
// CHECK-NEXT:    %[[INF:.*]] = ew.constant inf : tensor<f32>
// CHECK-NEXT:    %[[NAN:.*]] = ew.constant nan : tensor<f32>
// CHECK-NEXT:    %[[BIG:.*]] = ew.constant inf : tensor<f16>
// CHECK-NEXT:    func.return %[[V5]], %[[V1]], %[[V6]], %[[V15]], %[[V3]], %[[V2]], %[[V9]], %[[VM3]], %[[V3]], %[[E3]], %[[L3]], %[[T3]], %[[S3]], %[[F3]], %[[Q3]], %[[R3]], %[[Z]], %[[INF]], %[[NAN]], %[[NAN]], %[[BIG]]
func.func @fold_every_op() -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f16>) {
  %three = ew.constant 3.0 : tensor<f32>
  %two = ew.constant 2.0 : tensor<f32>
  %zero = ew.constant 0.0 : tensor<f32>
  %one = ew.constant 1.0 : tensor<f32>
  %add = ew.add %three, %two : tensor<f32>
  %sub = ew.sub %three, %two : tensor<f32>
  %mul = ew.mul %three, %two : tensor<f32>
  %div = ew.div %three, %two : tensor<f32>
  %max = ew.max %three, %two : tensor<f32>
  %min = ew.min %three, %two : tensor<f32>
  %pow = ew.pow %three, %two : tensor<f32>
  %neg = ew.neg %three : tensor<f32>
  %abs = ew.abs %neg : tensor<f32>
  %exp = ew.exp %three : tensor<f32>
  %log = ew.log %three : tensor<f32>
  %tanh = ew.tanh %three : tensor<f32>
  %sigmoid = ew.sigmoid %three : tensor<f32>
  %erf = ew.erf %three : tensor<f32>
  %sqrt = ew.sqrt %three : tensor<f32>
  %rsqrt = ew.rsqrt %three : tensor<f32>
  %relu = ew.relu %neg : tensor<f32>
  %inf = ew.div %one, %zero : tensor<f32>
  %nan = ew.div %zero, %zero : tensor<f32>
  %minus_one = ew.neg %one : tensor<f32>
  %log_neg = ew.log %minus_one : tensor<f32>
  %big = ew.constant 70000.0 : tensor<f16>
  %one16 = ew.constant 1.0 : tensor<f16>
  %overflow = ew.mul %big, %one16 : tensor<f16>
  func.return %add, %sub, %mul, %div, %max, %min, %pow, %neg, %abs, %exp, %log, %tanh, %sigmoid, %erf, %sqrt, %rsqrt, %relu, %inf, %nan, %log_neg, %overflow : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f16>
}

// An identity whose result type differs from x's (it broadcasts x) is kept.
// CHECK-LABEL: func.func @identity_keeps_broadcasts
// CHECK-SAME:    (%[[S:.*]]: tensor<f32>)
// CHECK:         %[[M:.*]] = ew.mul %[[S]], %{{.*}} : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:    func.return %[[M]], %[[S]]
func.func @identity_keeps_broadcasts(%s: tensor<f32>) -> (tensor<4xf32>, tensor<f32>) {
  %ones = ew.constant 1.0 : tensor<4xf32>
  %one = ew.constant 1.0 : tensor<f32>
  %m = ew.mul %s, %ones : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %n = ew.mul %s, %one : tensor<f32>
  func.return %m, %n : tensor<4xf32>, tensor<f32>
}

// An f16/bf16 conversion to its own type rounds what a kernel holds in f32: gone where the value
// is rounded already (an argument, a conversion's result), kept after an op.
// CHECK-LABEL: func.func @rounding_to_its_own_type
// CHECK-SAME:    (%[[X:.*]]: tensor<?xf16>, %[[Y:.*]]: tensor<?xbf16>)
// CHECK-NEXT:    %[[M:.*]] = ew.mul %[[X]], %[[X]] : tensor<?xf16>
// CHECK-NEXT:    %[[R:.*]] = ew.convert %[[M]] : tensor<?xf16> to tensor<?xf16>
// CHECK-NEXT:    func.return %[[X]], %[[R]], %[[Y]]
func.func @rounding_to_its_own_type(%x: tensor<?xf16>, %y: tensor<?xbf16>) -> (tensor<?xf16>, tensor<?xf16>, tensor<?xbf16>) {
  %a = ew.convert %x : tensor<?xf16> to tensor<?xf16>
  %m = ew.mul %x, %x : tensor<?xf16>
  %r = ew.convert %m : tensor<?xf16> to tensor<?xf16>
  %rr = ew.convert %r : tensor<?xf16> to tensor<?xf16>
  %b = ew.convert %y : tensor<?xbf16> to tensor<?xbf16>
  %bb = ew.convert %b : tensor<?xbf16> to tensor<?xbf16>
  func.return %a, %rr, %bb : tensor<?xf16>, tensor<?xf16>, tensor<?xbf16>
}

// 0 - x and x * -1 are not identities; x - x and x / c are unsafe and kept by default.
// CHECK-LABEL: func.func @not_identities
// CHECK:         ew.sub %{{.*}}, %[[X:.*]] : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
// CHECK:         ew.mul %[[X]], %{{.*}} : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
// CHECK:         ew.sub %[[X]], %[[X]] : tensor<?xf32>
// CHECK:         ew.div %[[X]], %{{.*}} : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
// UNSAFE-LABEL: func.func @not_identities
// UNSAFE-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[Y:.*]]: tensor<4xf32>)
// UNSAFE-DAG:     %[[ZERO:.*]] = ew.constant 0.0 : tensor<4xf32>
// UNSAFE-DAG:     %[[QUARTER:.*]] = ew.constant 0.25 : tensor<f32>
// UNSAFE-DAG:     ew.sub %[[X]], %[[X]] : tensor<?xf32>
// UNSAFE-DAG:     %[[Q:.*]] = ew.mul %[[X]], %[[QUARTER]] : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
// UNSAFE:         func.return %{{.*}}, %{{.*}}, %{{.*}}, %[[Q]], %[[ZERO]]
func.func @not_identities(%x: tensor<?xf32>, %y: tensor<4xf32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<4xf32>) {
  %zero = ew.constant 0.0 : tensor<f32>
  %minus_one = ew.constant -1.0 : tensor<f32>
  %four = ew.constant 4.0 : tensor<f32>
  %a = ew.sub %zero, %x : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %b = ew.mul %x, %minus_one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %c = ew.sub %x, %x : tensor<?xf32>
  %d = ew.div %x, %four : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %e = ew.sub %y, %y : tensor<4xf32>
  func.return %a, %b, %c, %d, %e : tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<?xf32>, tensor<4xf32>
}

// Unsafe too, a division by a constant whose reciprocal is not a normal float32 (1/1e38 is
// subnormal: x * it loses bits x / 1e38 keeps) stays a division.
// UNSAFE-LABEL: func.func @tiny_reciprocal
// UNSAFE-NOT:     ew.mul
// UNSAFE:         ew.div
func.func @tiny_reciprocal(%x: tensor<?xf32>) -> tensor<?xf32> {
  %big = ew.constant 1.0e38 : tensor<f32>
  %d = ew.div %x, %big : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  func.return %d : tensor<?xf32>
}

// log(1 + exp(x)) is +inf where exp(x) overflows and softplus(x) is x: softplus only with
// unsafe-math, for either order of the add (CSE then shares them); a broadcasting add keeps its log.
// CHECK-LABEL: func.func @log_one_plus_exp
// CHECK-NOT:     ew.softplus
// CHECK:         func.return
// UNSAFE-LABEL: func.func @log_one_plus_exp
// UNSAFE-SAME:    (%[[X:.*]]: tensor<?xf32>, %[[S:.*]]: tensor<f32>)
// UNSAFE:        %[[A:.*]] = ew.softplus %[[X]] : tensor<?xf32>
// UNSAFE-NEXT:   %[[E:.*]] = ew.exp %[[S]] : tensor<f32>
// UNSAFE-NEXT:   %[[SUM:.*]] = ew.add %{{.*}}, %[[E]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// UNSAFE-NEXT:   %[[C:.*]] = ew.log %[[SUM]] : tensor<4xf32>
// UNSAFE-NEXT:   func.return %[[A]], %[[A]], %[[C]]
func.func @log_one_plus_exp(%x: tensor<?xf32>, %s: tensor<f32>) -> (tensor<?xf32>, tensor<?xf32>, tensor<4xf32>) {
  %one = ew.constant 1.0 : tensor<f32>
  %ones = ew.constant 1.0 : tensor<4xf32>
  %e = ew.exp %x : tensor<?xf32>
  %sum = ew.add %one, %e : tensor<f32>, tensor<?xf32> -> tensor<?xf32>
  %a = ew.log %sum : tensor<?xf32>
  %sum2 = ew.add %e, %one : tensor<?xf32>, tensor<f32> -> tensor<?xf32>
  %b = ew.log %sum2 : tensor<?xf32>
  %es = ew.exp %s : tensor<f32>
  %sum3 = ew.add %ones, %es : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %c = ew.log %sum3 : tensor<4xf32>
  func.return %a, %b, %c : tensor<?xf32>, tensor<?xf32>, tensor<4xf32>
}
